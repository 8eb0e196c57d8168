"""stef/judges"""
