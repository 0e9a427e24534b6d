"""fpga package."""
