"""stef/judges/heuristic"""
