"""stef/service"""
