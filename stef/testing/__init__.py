"""stef/testing"""
