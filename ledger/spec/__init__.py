"""The protocol's specification in pure Python: the contract math reference, the histogram rules, the carry,
wire encodings and task parameters. Everything above reads its rules from here."""
