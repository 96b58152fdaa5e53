"""What the main job prints about a run: the per-role summary (``summary``) and the role table
(``role_table``)."""
