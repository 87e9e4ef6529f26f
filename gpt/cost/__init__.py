"""What each attention variant costs at long context: `python -m gpt cost`, its alternated rounds, its table and plot,
and Hugging Face's counterparts."""
