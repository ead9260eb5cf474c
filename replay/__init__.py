"""Replaying application demand into real TCP stacks (one or a chain) and into ns-3."""
