#!/usr/bin/env python3
"""random_sample_cuda.py SEED N [SKIP]: random_sample.py's campaign over the CUDA backend
(cuda/*.cu, the emulator's own files not included): a random sample of N first-order mutants,
each applied alone in a clone ($MUT_CLONE, built once with `make CUDA=emu cuda-check`), the
emulator build remade, and the GPU tests run on the emulator as tests/run.sh's part `gpu` runs
them (the same environments, quick ones first, test_gpu_dmr (minutes) last; stop at the
first failure); the file restored (random_sample.py's `campaign`).
Prints one line per mutant: id, file:line, before -> after, verdict, killing run.
Example: MUT_CLONE=/tmp/clone python3 tests/mutants/random_sample_cuda.py 1 16"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_sample import CLONE, campaign  # noqa: E402

EMU = 'build/cuda-emu/tests/gpu'

# tests/run.sh's emulator runs: (test, FTEMU_ORDER, FTLLM_CUDA_ATTENTION, FTEMU_STREAMS)
RUNS = [('test_gpu_ops', o, a, 'lazy') for a in ('rows', 'flash', 'gemm', 'tc')
        for o in ('forward', 'reverse')]
RUNS += [('test_gpu_ops', 'forward', 'rows', 'mixed'), ('test_gpu_nccl', 'forward', 'rows', 'mixed'),
         ('test_gpu_nccl', 'forward', 'rows', 'lazy'), ('test_gpu_train', 'forward', 'gemm', 'lazy'),
         ('test_gpu_train', 'forward', 'tc', 'lazy'), ('test_gpu_dmr', 'reverse', 'rows', 'lazy')]


def main():
    files = sorted('cuda/' + f for f in os.listdir(CLONE + '/cuda') if f.endswith('.cu'))
    campaign('C', files, lambda f: 'make -j2 CUDA=emu DEBUG=0 SAN= cuda-check',
             lambda f: ((f'{t} ({o}, {a}, {st}', f'FTEMU_ORDER={o} FTLLM_CUDA_ATTENTION={a} '
                         f'FTEMU_STREAMS={st} timeout 900 mpiexec -n 1 {EMU}/{t}')
                        for t, o, a, st in RUNS))


if __name__ == '__main__':
    main()
