"""What a trained GPT does: model.pt files, sampling and the cached decode loop, the text API."""
