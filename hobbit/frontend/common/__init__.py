"""What every model format's frontend shares: the Source interface through which the rest of
hobbit reaches a model (source.py), the context converters emit graph ops through
(context.py), the bounded path for data-dependent dims (bounded.py), the largest tensor a
model may hold (sizes.py), element types by their ONNX numbers (dtypes.py), graph-op
builders both ONNX and TensorFlow converters call (batchnorm.py, einsum.py, resize.py,
padding.py, half.py: float16/bfloat16 computed in float32), and telling an export folder
given as a model apart from a model (export_folder.py). Nothing here imports a format's
package."""
