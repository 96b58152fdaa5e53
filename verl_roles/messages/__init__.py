"""How a user is told: the wording of every problem as one paragraph (``wording``) and the translation of
Hydra's and OmegaConf's errors into problems (``library_messages``)."""
