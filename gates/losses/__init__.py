"""Loss series: reading them strictly, and comparing them bit by bit."""
