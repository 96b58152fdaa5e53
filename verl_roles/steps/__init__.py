"""The steps from a composed config to the one a run uses: the pipeline that runs them in order
(``pipeline``), per-role settings over the engine baseline (``roles``), verl's flat LoRA keys derived from
the LoRA block (``flat_lora``) and the sequence-parallel follow rule (``sequence_parallel``)."""
