"""The party daemon: a node that joins a task on chain, follows it level by level, endorses the other parties'
histograms over its endpoints and relays a level's submissions."""
