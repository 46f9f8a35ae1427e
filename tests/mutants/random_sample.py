#!/usr/bin/env python3
"""random_sample.py SEED N [SKIP]: the campaign of random_sample.md. A random sample of N
first-order mutants of src/**/*.c, each applied alone in a clone of this repository ($MUT_CLONE,
built once with `make bin/ftllm` and the unit tests), bin/ftllm and the unit tests rebuilt and
run (tests whose source names the module first, stop at the first failure), the file restored.
Prints one line per mutant: id, file:line, before -> after, verdict, killing test.
Example: MUT_CLONE=/tmp/clone python3 tests/mutants/random_sample.py 2 30"""
import os, random, re, subprocess, sys, time

CLONE = os.environ.get('MUT_CLONE', '')

OPS = [  # (regex, replacements)
    (r'(?<![<>=!])==(?!=)', ['!=']), (r'!=', ['==']),
    (r'(?<![<>=-])<=', ['<']), (r'(?<![<>=-])>=', ['>']),
    (r'(?<![<>=-])<(?![<=])', ['<=']), (r'(?<![<>=-])>(?![>=])', ['>=']),
    (r'&&', ['||']), (r'\|\|', ['&&']),
    (r'(?<=[\w)\]] )\+(?= [\w(])', ['-']), (r'(?<=[\w)\]] )-(?= [\w(])', ['+']),
    (r'(?<=[\w)\]] )\*(?= [\w(])', ['/']),
    (r'(?<![\w.])([0-9]+)(?![\w.])', None),  # integer constant: n -> n+1, or 1 -> 0
]


def sites(path):
    out = []
    incomment = False
    for ln, line in enumerate(open(path).read().split('\n'), 1):
        s = line
        if incomment:
            if '*/' not in s: continue
            s = ' ' * (s.index('*/') + 2) + s[s.index('*/') + 2:]
            incomment = False
        st = s.lstrip()
        if st.startswith('#') or st.startswith('//'): continue
        # blank out comments and strings, keeping columns
        s = re.sub(r'"(\\.|[^"\\])*"', lambda m: ' ' * len(m.group(0)), s)
        s = re.sub(r"'(\\.|[^'\\])*'", lambda m: ' ' * len(m.group(0)), s)
        s = re.sub(r'/\*.*?\*/', lambda m: ' ' * len(m.group(0)), s)
        if '/*' in s:
            s = s[:s.index('/*')]
            incomment = True
        if '//' in s: s = s[:s.index('//')]
        if re.match(r'\s*(static\s+)?(const\s+)?(enum|struct|typedef)\b', s) and '(' not in s:
            continue
        for rx, reps in OPS:
            for m in re.finditer(rx, s):
                if reps is None:
                    n = int(m.group(1))
                    reps2 = [str(n + 1)] if n != 1 else ['0']
                else:
                    reps2 = reps
                for r in reps2:
                    out.append((ln, m.start(), m.end(), r))
        m = re.match(r'(\s*(\}\s*else\s+)?if \()(.*)\)\s*(\{|[^{].*;)?\s*$', s)
        if m and m.group(3).count('(') == m.group(3).count(')'):
            out.append((ln, -1, -1, 'if-negate'))
    return out


def apply(path, site):
    ln, a, b, r = site
    lines = open(path).read().split('\n')
    L = lines[ln - 1]
    if r == 'if-negate':
        m = re.match(r'(\s*(\}\s*else\s+)?if \()', L)
        k = m.end()
        depth, j = 1, k
        while depth:
            depth += {'(': 1, ')': -1}.get(L[j], 0)
            j += 1
        new = L[:k] + '!(' + L[k:j - 1] + ')' + L[j - 1:]
    else:
        new = L[:a] + r + L[b:]
    lines[ln - 1] = new
    open(path, 'w').write('\n'.join(lines))
    return L.strip(), new.strip()


def sh(cmd, timeout=None):
    return subprocess.run(cmd, shell=True, cwd=CLONE, capture_output=True, text=True, executable='/bin/bash',
                          timeout=timeout)


def tests_for(path):
    base = os.path.basename(path)[:-2]
    mod = base.split('_')[0]
    tests = sorted(f[:-2] for f in os.listdir(CLONE + '/tests') if re.match(r'test_.*\.c$', f))
    times = {}
    tf = os.environ.get('MUT_TIMES', '')  # "test seconds" lines: quick tests first
    if tf and os.path.exists(tf):
        for l in open(tf):
            k, v = l.split()
            times[k] = float(v)
    def related(t):
        src = open(f'{CLONE}/tests/{t}.c').read()
        return base in src or mod in t
    tests.sort(key=lambda t: (not related(t), times.get(t, 30)))
    return tests


def ranks(t):
    m = re.search(r'ft-test: ranks ([0-9 ]*)', open(f'{CLONE}/tests/{t}.c').read())
    return m.group(1).split() if m else ['1']


def campaign(tag, files, build, runs):
    """The draw and the loop both campaigns share: argv's SEED N [SKIP] draw N sites of files
    (paths relative to CLONE); each mutant is applied alone, built (build(f): a shell command),
    then the runs(f) tried in order ((label, shell command) pairs: the first that fails kills
    it), and the file restored. One line per mutant, its id tag + number."""
    seed, N = int(sys.argv[1]), int(sys.argv[2])
    skip = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rng = random.Random(seed)
    allsites = [(f, s) for f in files for s in sites(os.path.join(CLONE, f))]
    print(f'# seed {seed}: {len(allsites)} sites in {len(files)} files', flush=True)
    picks = rng.sample(allsites, N + skip)[skip:]
    for i, (f, s) in enumerate(picks, skip + 1):
        path = os.path.join(CLONE, f)
        orig = open(path).read()
        try:
            before, after = apply(path, s)
            if before == after:
                print(f'{tag}{i:02d} {f}:{s[0]} no change', flush=True)
                continue
            t0 = time.time()
            if sh(build(f) + ' 2>&1 | tail -3; exit ${PIPESTATUS[0]}').returncode:
                print(f'{tag}{i:02d} {f}:{s[0]} | {before} -> {after} | STILLBORN', flush=True)
                continue
            verdict = 'SURVIVED'
            for label, cmd in runs(f):
                r = sh(cmd + ' > /tmp/mut.log 2>&1')
                if r.returncode:
                    verdict = f'KILLED by {label}; rc {r.returncode})'
                    break
            print(f'{tag}{i:02d} {f}:{s[0]} | {before} -> {after} | {verdict} '
                  f'({time.time() - t0:.0f} s)', flush=True)
        finally:
            open(path, 'w').write(orig)
            os.utime(path)


def main():
    files = sorted(os.path.relpath(os.path.join(d, f), CLONE)
                   for d, _, fs in os.walk(CLONE + '/src') for f in fs if f.endswith('.c'))
    campaign('R', files,
             lambda f: 'make -j2 bin/ftllm build/release/tests/' +
                       ' build/release/tests/'.join(tests_for(f)),
             lambda f: ((f'{t} (np {n}', f'OMP_NUM_THREADS=1 timeout 300 mpiexec -n {n} '
                         f'build/release/tests/{t}') for t in tests_for(f) for n in ranks(t)))


if __name__ == '__main__':
    main()
