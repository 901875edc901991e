"""What every checker writes, the same way: its output file, its receipt, and how the audit
will count them."""
