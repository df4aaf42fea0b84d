"""deepstack: hierarchical network-on-chip cost model (profiles, routing, collectives, MoE statistics)."""
