"""classifierd's encoder training: fine-tune all-MiniLM-L6-v2 for tool
retrieval on toolret-train (contrastive, in-batch and hard negatives) in
JAX on the CPU, then hand the weights to tools/modelconv, which converts,
verifies and quantises them like every other model."""
