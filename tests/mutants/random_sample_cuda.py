#!/usr/bin/env python3
"""random_sample_cuda.py SEED N [SKIP]: random_sample.py's campaign over the CUDA backend
(cuda/*.cu, the emulator's own files not included): a random sample of N first-order mutants,
each applied alone in a clone ($MUT_CLONE, built once with `make CUDA=emu cuda-check`), the
emulator build remade, and the GPU tests run on the emulator as tests/run.sh's part `gpu` runs
them (the same environments, quick ones first (test_gpu_dmr, minutes, last), stop at the first failure); the file restored.
Prints one line per mutant: id, file:line, before -> after, verdict, killing run.
Example: MUT_CLONE=/tmp/clone python3 tests/mutants/random_sample_cuda.py 1 16"""
import os, random, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_sample import apply, sites  # noqa: E402

CLONE = os.environ['MUT_CLONE']
EMU = 'build/cuda-emu/tests/gpu'

# tests/run.sh's emulator runs: (test, FTEMU_ORDER, FTLLM_CUDA_ATTENTION, FTEMU_STREAMS)
RUNS = [('test_gpu_ops', o, a, 'lazy') for a in ('rows', 'flash', 'gemm', 'tc')
        for o in ('forward', 'reverse')]
RUNS += [('test_gpu_ops', 'forward', 'rows', 'mixed'), ('test_gpu_nccl', 'forward', 'rows', 'mixed'),
         ('test_gpu_nccl', 'forward', 'rows', 'lazy'), ('test_gpu_train', 'forward', 'gemm', 'lazy'),
         ('test_gpu_train', 'forward', 'tc', 'lazy'), ('test_gpu_dmr', 'reverse', 'rows', 'lazy')]


def sh(cmd, timeout=None):
    return subprocess.run(cmd, shell=True, cwd=CLONE, capture_output=True, text=True,
                          executable='/bin/bash', timeout=timeout)


def main():
    seed, N = int(sys.argv[1]), int(sys.argv[2])
    skip = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rng = random.Random(seed)
    files = sorted('cuda/' + f for f in os.listdir(CLONE + '/cuda') if f.endswith('.cu'))
    allsites = [(f, s) for f in files for s in sites(os.path.join(CLONE, f))]
    print(f'# cuda seed {seed}: {len(allsites)} sites in {len(files)} files', flush=True)
    picks = rng.sample(allsites, N + skip)[skip:]
    for i, (f, s) in enumerate(picks, skip + 1):
        path = os.path.join(CLONE, f)
        orig = open(path).read()
        try:
            before, after = apply(path, s)
            if before == after:
                print(f'C{i:02d} {f}:{s[0]} no change', flush=True)
                continue
            t0 = time.time()
            b = sh('make -j2 CUDA=emu DEBUG=0 SAN= cuda-check 2>&1 | tail -3; exit ${PIPESTATUS[0]}')
            if b.returncode:
                print(f'C{i:02d} {f}:{s[0]} | {before} -> {after} | STILLBORN', flush=True)
                continue
            verdict = 'SURVIVED'
            for t, order, att, streams in RUNS:
                r = sh(f'FTEMU_ORDER={order} FTLLM_CUDA_ATTENTION={att} FTEMU_STREAMS={streams} '
                       f'timeout 900 mpiexec -n 1 {EMU}/{t} > /tmp/mutc.log 2>&1')
                if r.returncode:
                    verdict = f'KILLED by {t} ({order}, {att}, {streams}; rc {r.returncode})'
                    break
            print(f'C{i:02d} {f}:{s[0]} | {before} -> {after} | {verdict} '
                  f'({time.time() - t0:.0f} s)', flush=True)
        finally:
            open(path, 'w').write(orig)
            os.utime(path)


if __name__ == '__main__':
    main()
