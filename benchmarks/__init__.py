"""``make bench``: our backend beside common-ai's built-in one and the raw SDK, on the stack."""
