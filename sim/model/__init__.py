"""The model of a run: scenario, peers and sites, churn, rejoin, initial vectors."""
