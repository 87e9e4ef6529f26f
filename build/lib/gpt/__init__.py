"""tinygpt: a tiny GPT built from parts chosen by config."""
from gpt.attention import ATTENTION
from gpt.checkpoint import load_checkpoint
from gpt.config import ModelConfig
from gpt.generation import generate
from gpt.model import GPT
from gpt.text import TextModel, load

__all__ = ["ATTENTION", "GPT", "ModelConfig", "TextModel", "generate", "load", "load_checkpoint"]
