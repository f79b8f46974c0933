"""What a greedy party may do, for experiments: the same attack in every harness."""
