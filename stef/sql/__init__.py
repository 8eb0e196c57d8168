"""stef/sql"""
