"""ONNX models: the importer (importer.py, ModelProto -> Graph), the checks it trusts
(validate.py: the schema's structure; rules.py: the spec's attribute values), external-data
weights (external_data.py), function-op expansion (functions.py), the converter table
(converters.py) and the converters by op family (ops/)."""
