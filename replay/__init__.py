"""What-if trace replay (issue 12): a discrete-event simulation feeding the pure policy. No Django."""
