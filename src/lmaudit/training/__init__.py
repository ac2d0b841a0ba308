"""Canaries planted and checked inside the user's own Hugging Face training script (`CanaryCallback`)."""
