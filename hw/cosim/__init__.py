"""Co-simulation of the generated Verilog under Verilator with cocotb (see :mod:`hw.cosim.runner`)."""
