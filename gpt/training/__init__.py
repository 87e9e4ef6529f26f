"""How a GPT learns: the Lightning module, optimizers, callbacks, resume, loggers, the run record."""
