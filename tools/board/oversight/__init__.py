"""What pinclaw keeps watch over on its boards' outputs: interlocks, the longest an output
may stay on, the log of every change, kept readings of watched pins and their charts. May
import tools/board and the tools core."""
