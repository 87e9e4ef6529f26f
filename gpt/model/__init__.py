"""What a GPT is: config, embeddings, blocks of attention and MLP, norms, positions. Plain torch only."""
