"""What a GPT reads: input formats, tokenizers, token shards, batch streams, the corpora and the tasks."""
