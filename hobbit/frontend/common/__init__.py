"""What every model format's frontend shares: the bounded path for data-dependent dims
(bounded.py), float16/bfloat16 computed in float32 (half.py), explicit pads (padding.py),
and telling an export folder given as a model apart from a model (export_folder.py)."""
