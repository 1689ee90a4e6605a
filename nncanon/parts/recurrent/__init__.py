"""Recurrent mixers: the blocks whose state is handed on (convolution windows, DeltaNet's and the selective scans'
states, the RG-LRU's), and stacks that mix them with attention."""
