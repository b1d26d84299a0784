"""The one trainer every notebook uses, with monitoring, checkpoints and memory tools."""
