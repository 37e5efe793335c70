"""Specs of the optim family (Rec SDK's fused sparse optimizers)."""
