"""Reading safetensors files: the header, never the whole file."""
