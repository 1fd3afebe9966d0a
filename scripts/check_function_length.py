#!/usr/bin/env python3
"""The function-length check (CTest `function_length`): every function defined
in the C++ files under the given folders is at most LIMIT lines long, from its
signature's first line to its closing brace (a lambda counts with the function
it is written in). Prints each longer one and exits 1 when there is one.

    scripts/check_function_length.py LIMIT FOLDER...

Reads clang-formatted sources: comments, strings and character literals are
skipped; a body is a `{` that follows `)` (with const, noexcept, override, a
trailing return type or a constructor's initializer list after it) at
namespace or class scope, not after if/for/while/switch/catch.
"""
import os
import re
import sys

def strip(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(')' + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(' ' * (min(j, n - 1) + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def is_function_head(head):
    """Whether the text before a `{` at namespace or class scope ends a function signature."""
    h = ' '.join(head.split())
    if re.match(r'^(namespace|struct|class|union|enum|extern|if|for|while|switch|catch|do|else|try)\b', h):
        return False
    # f(...) [const] [noexcept] [override] [final] [-> T], or a constructor's C(...) : a(x), b(y)
    return bool(re.search(r'\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(final\s*)?(->\s*[\w:<>,\s*&]+)?$', h)
                or re.search(r'\)\s*:\s*[\w:]+\s*\(.*\)$', h))


def functions(path):
    text = strip(open(path, encoding='utf-8').read())
    stack = []  # entries: ('fn', start_line) or ('scope', None) or ('block', None)
    head_start = 0  # index where the current statement/head began
    line_of = lambda idx: text.count('\n', 0, idx) + 1
    i = 0
    for i, c in enumerate(text):
        if c in ';':
            head_start = i + 1
        elif c == '{':
            in_fn = any(k == 'fn' for k, _ in stack)
            head = text[head_start:i]
            if not in_fn and is_function_head(head):
                first = head_start + len(head) - len(head.lstrip())
                stack.append(('fn', line_of(first)))
            elif not in_fn and re.match(r'^\s*(namespace|struct|class|union|extern)\b', head):
                stack.append(('scope', None))
            else:
                stack.append(('block', None))
            head_start = i + 1
        elif c == '}':
            if stack:
                kind, start = stack.pop()
                if kind == 'fn':
                    yield start, line_of(i)
            head_start = i + 1


def main():
    limit = int(sys.argv[1])
    bad = 0
    for folder in sys.argv[2:]:
        for root, _, files in os.walk(folder):
            for f in sorted(files):
                if not f.endswith(('.cpp', '.h')):
                    continue
                path = os.path.join(root, f)
                lines = open(path, encoding='utf-8').read().split('\n')
                for start, end in functions(path):
                    if end - start + 1 > limit:
                        print(f'function_length: {path}:{start}: {end - start + 1} lines (at most {limit}): '
                              f'{lines[start - 1].strip()[:80]}')
                        bad = 1
    if not bad:
        print(f'function_length: every function in {" ".join(sys.argv[2:])} has at most {limit} lines')
    return bad


if __name__ == '__main__':
    sys.exit(main())
