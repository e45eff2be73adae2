"""What a run leaves: result folders, figures, sweeps."""
