"""stef/calibrate"""
