"""How good a GPT is and where it looks: grading by generation, bits per byte, attention maps."""
