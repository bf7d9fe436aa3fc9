"""Vendor semantics on real vendor facts: 40 bulletins of NVIDIA, Intel, AMD and OSV.

The facts (advisory ids, product names and version phrases exactly as the vendor writes
them, ranges, fixed versions, scores, CWE, the words that place a CVE in a component) are
copied from the vendors' own documents; the documents themselves are not committed. Each
is rebuilt here in its real structure (NVIDIA: CSAF 2.0 product tree -> architecture ->
product_version, per-CVE product_status; Intel/AMD: CVE JSON 5; PyTorch: OSV) and names
its source. The expected verdicts are written from the vendor's text:

- NVIDIA bulletins: https://github.com/NVIDIA/product-security/blob/main/<year>/<id>/<id>.json
  (snapshot dbb4ada05315, 2026-08-18);
- Intel: the CVE JSON 5 records in github.com/CVEProject/cvelistV5 and
  https://www.intel.com/content/www/us/en/security-center/advisory/intel-sa-NNNNN.html;
- AMD: https://www.amd.com/en/resources/product-security/bulletin/amd-sb-NNNN.html;
- PyTorch: https://github.com/advisories/GHSA-53q9-r3pm-6pq6 (OSV).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pytest

from gpusbom.advisories.db import AdvisoryDB, load_records, validate_record
from gpusbom.advisories.importers.csaf import gpu_record, import_csaf
from gpusbom.advisories.importers.cve5 import by_advisory, import_cve5
from gpusbom.advisories.importers.osv import import_osv
from gpusbom.advisories.matcher import match
from gpusbom.model import Component, ComponentType, Evidence

NVIDIA_URL = "https://github.com/NVIDIA/product-security/blob/main/{year}/{bid}/{bid}.json"

# bulletin -> (title, initial release date, {CVE: facts}); entries are
# (architecture, product, version phrase) exactly as NVIDIA's product tree has them
NVIDIA = {
    '5614': ('Security Bulletin: NVIDIA GPU Display Driver - January 2025', '2025-01-16', {
        'CVE-2024-0150': {'where': 'NVIDIA GPU display driver for Windows and Linux contains a vulnerability', 'cwe': 'CWE-787', 'cvss': (7.1, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:H/A:H'),
            'affected': [('Linux(R570)', 'GeForce', 'All driver versions prior to 570.86.16'), ('Linux(R550)', 'GeForce', 'All driver versions prior to 550.144.03'), ('Linux(R535)', 'GeForce', 'All driver versions prior to 535.230.02'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 570.86.16'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 550.144.03'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 535.230.02'), ('Linux(R570)', 'Tesla', 'All driver versions prior to 570.86.15'), ('Linux(R550)', 'Tesla', 'All driver versions prior to 550.144.03'), ('Linux(R535)', 'Tesla', 'All driver versions prior to 535.230.02')],
            'fixed': [('Linux(R570)', 'GeForce', '570.86.16'), ('Linux(R550)', 'GeForce', '550.144.03'), ('Linux(R535)', 'GeForce', '535.230.02'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', '570.86.16'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', '550.144.03'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', '535.230.02'), ('Linux(R570)', 'Tesla', '570.86.15'), ('Linux(R550)', 'Tesla', '550.144.03'), ('Linux(R535)', 'Tesla', '535.230.02')]},
        'CVE-2024-53869': {'where': 'NVIDIA Unified Memory driver for Linux contains a vulnerability', 'cwe': 'CWE-459', 'cvss': (5.5, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:N/A:N'),
            'affected': [('Linux(R570)', 'GeForce', 'All driver versions prior to 570.86.16'), ('Linux(R550)', 'GeForce', 'All driver versions prior to 550.144.03'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 570.86.16'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 550.144.03'), ('Linux(R570)', 'Tesla', 'All driver versions prior to 570.86.15'), ('Linux(R550)', 'Tesla', 'All driver versions prior to 550.144.03')],
            'fixed': [('Linux(R570)', 'GeForce', '570.86.16'), ('Linux(R550)', 'GeForce', '550.144.03'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', '570.86.16'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', '550.144.03'), ('Linux(R570)', 'Tesla', '570.86.15'), ('Linux(R550)', 'Tesla', '550.144.03')]},
    }),
    '5747': ('Security Bulletin: GPU Display Driver - January 2026', '2026-01-28', {
        'CVE-2025-33217': {'where': 'NVIDIA Display Driver for Windows contains a vulnerability', 'cwe': 'CWE-416', 'cvss': (7.8, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H'),
            'affected': [('Windows(R590)', 'GeForce', 'All driver versions prior to 591.59'), ('Windows(R590)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 591.59'), ('Windows(R580)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 582.16'), ('Windows(R570)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 573.96'), ('Windows(R535)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 539.64'), ('Windows(R590)', 'Tesla', 'All driver versions prior to 591.59'), ('Windows(R580)', 'Tesla', 'All driver versions prior to 582.16'), ('Windows(R570)', 'Tesla', 'All driver versions prior to 573.96'), ('Windows(R535)', 'Tesla', 'All driver versions prior to 539.64')],
            'fixed': [('Windows(R590)', 'GeForce', '591.59'), ('Windows(R590)', 'NVIDIA RTX PRO, RTX, Quadro', '591.59'), ('Windows(R580)', 'NVIDIA RTX PRO, RTX, Quadro', '582.16'), ('Windows(R570)', 'NVIDIA RTX PRO, RTX, Quadro', '573.96'), ('Windows(R535)', 'NVIDIA RTX PRO, RTX, Quadro', '539.64'), ('Windows(R590)', 'Tesla', '591.59'), ('Windows(R580)', 'Tesla', '582.16'), ('Windows(R570)', 'Tesla', '573.96'), ('Windows(R535)', 'Tesla', '539.64')]},
        'CVE-2025-33219': {'where': 'NVIDIA Display Driver for Linux contains a vulnerability in the NVIDIA kernel module where an attacker could cause an integer overflow or wraparound. A successful exploit of this vulnerability might lead to code execution', 'cwe': 'CWE-190', 'cvss': (7.8, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H'),
            'affected': [('Linux(R590)', 'GeForce', 'All driver versions prior to 590.48.01'), ('Linux(R580)', 'GeForce', 'All driver versions prior to 580.126.09'), ('Linux(R570)', 'GeForce', 'All driver versions prior to 570.211.01'), ('Linux(R535)', 'GeForce', 'All driver versions prior to 535.288.01'), ('Linux(R590)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 590.48.01'), ('Linux(R580)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 580.126.09'), ('Linux(R570)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 570.211.01'), ('Linux(R535)', 'NVIDIA RTX PRO, RTX, Quadro', 'All driver versions prior to 535.288.01'), ('Linux(R590)', 'Tesla', 'All driver versions prior to 590.48.01'), ('Linux(R580)', 'Tesla', 'All driver versions prior to 580.126.09'), ('Linux(R570)', 'Tesla', 'All driver versions prior to 570.211.01'), ('Linux(R535)', 'Tesla', 'All driver versions prior to 535.288.01'), ('Linux(Gaming)', 'Guest driver', '580.105.08(All versions up to and including the November 2025 release)'), ('Red Hat Enterprise Linux KVM, VMware vSphere(Gaming)', 'Virtual GPU Manager', '580.105.06(All versions up to and including the November 2025 release)')],
            'fixed': [('Linux(R590)', 'GeForce', '590.48.01'), ('Linux(R580)', 'GeForce', '580.126.09'), ('Linux(R570)', 'GeForce', '570.211.01'), ('Linux(R535)', 'GeForce', '535.288.01'), ('Linux(R590)', 'NVIDIA RTX PRO, RTX, Quadro', '590.48.01'), ('Linux(R580)', 'NVIDIA RTX PRO, RTX, Quadro', '580.126.09'), ('Linux(R570)', 'NVIDIA RTX PRO, RTX, Quadro', '570.211.01'), ('Linux(R535)', 'NVIDIA RTX PRO, RTX, Quadro', '535.288.01'), ('Linux(R590)', 'Tesla', '590.48.01'), ('Linux(R580)', 'Tesla', '580.126.09'), ('Linux(R570)', 'Tesla', '570.211.01'), ('Linux(R535)', 'Tesla', '535.288.01'), ('Linux(Gaming)', 'Guest driver', '590.48.01(December 2025 Release)'), ('Red Hat Enterprise Linux KVM, VMware vSphere(Gaming)', 'Virtual GPU Manager', '590.48.01(December 2025 Release)')]},
    }),
    '5586': ('Security Bulletin: NVIDIA GPU Display Driver - October 2024', '2024-10-22', {
        'CVE-2024-0126': {'where': 'NVIDIA GPU software contains a vulnerability', 'cwe': 'CWE-20', 'cvss': (8.2, 'CVSS:3.1/AV:L/AC:L/PR:H/UI:N/S:C/C:H/I:H/A:H'),
            'affected': [('Linux(R565)', 'GeForce', 'All driver versions prior to 565.57.01'), ('Linux(R565)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 565.57.01'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 550.127.05'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 535.216.01'), ('Linux(R550)', 'Tesla', 'All driver versions prior to 550.127.05'), ('Linux(R535)', 'Tesla', 'All driver versions prior to 535.216.01'), ('Linux(R550)', 'GeForce', 'All driver versions prior to 550.127.05'), ('Linux(R535)', 'GeForce', 'All driver versions prior to 535.216.01'), ('Red Hat Enterprise Linux KVM, VMware vSphere(R560 Gaming)', 'Virtual GPU Manager', '560.35.02(All versions prior to and including the September 2024 release)')],
            'fixed': [('Linux(R565)', 'GeForce', '565.57.01'), ('Linux(R565)', 'NVIDIA RTX, Quadro, NVS', '565.57.01'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', '550.127.05'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', '535.216.01'), ('Linux(R550)', 'Tesla', '550.127.05'), ('Linux(R535)', 'Tesla', '535.216.01'), ('Linux(R550)', 'GeForce', '550.127.05'), ('Linux(R535)', 'GeForce', '535.216.01'), ('Red Hat Enterprise Linux KVM, VMware vSphere(R560 Gaming)', 'Virtual GPU Manager', '565.57.01(October 2024 Release)')]},
    }),
    '5821': ('Security Bulletin: GPU Display Driver - May 2026', '2026-05-19', {
        'CVE-2026-24187': {'where': 'NVIDIA Display Driver for Linux contains a vulnerability', 'cwe': 'CWE-416', 'cvss': (8.8, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H'),
            'affected': [('Linux(R595)', 'GeForce', 'All driver versions prior to 595.71.05'), ('Linux(R580)', 'GeForce', 'All driver versions prior to 580.159.03'), ('Linux(R535)', 'GeForce', 'All driver versions prior to 535.309.01'), ('Linux(R595)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 595.71.05'), ('Linux(R580)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 580.159.03'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 535.309.01'), ('Linux(R595)', 'Tesla', 'All driver versions prior to 595.71.05'), ('Linux(R580)', 'Tesla', 'All driver versions prior to 580.159.03'), ('Linux(R535)', 'Tesla', 'All driver versions prior to 535.309.01'), ('Linux(Cloud Gaming)', 'Guest driver', '595.58.03(All versions up to and including the March 2026 release)'), ('Red Hat Enterprise Linux KVM, VMware vSphere(Cloud Gaming)', 'Virtual GPU Manager', '595.58.02(All versions up to and including the March 2026 release)')],
            'fixed': [('Linux(R595)', 'GeForce', '595.71.05'), ('Linux(R580)', 'GeForce', '580.159.03'), ('Linux(R535)', 'GeForce', '535.309.01'), ('Linux(R595)', 'NVIDIA RTX, Quadro, NVS', '595.71.05'), ('Linux(R580)', 'NVIDIA RTX, Quadro, NVS', '580.159.03'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', '535.309.01'), ('Linux(R595)', 'Tesla', '595.71.05'), ('Linux(R580)', 'Tesla', '580.159.03'), ('Linux(R535)', 'Tesla', '535.309.01'), ('Linux(Cloud Gaming)', 'Guest driver', '595.71.05(April 2026 Release)'), ('Red Hat Enterprise Linux KVM, VMware vSphere(Cloud Gaming)', 'Virtual GPU Manager', '595.71.03(April 2026 Release)')]},
    }),
    '5703': ('Security Bulletin: NVIDIA GPU Display Driver - October 2025', '2025-10-09', {
        'CVE-2025-23280': {'where': 'NVIDIA Display Driver for Linux contains a vulnerability', 'cwe': 'CWE-416', 'cvss': (7, 'CVSS:3.1/AV:L/AC:H/PR:L/UI:N/S:U/C:H/I:H/A:H'),
            'affected': [('Linux(R580)', 'GeForce', 'All driver versions prior to 580.95.05'), ('Linux(R570)', 'GeForce', 'All driver versions prior to 570.195.03'), ('Linux(R535)', 'GeForce', 'All driver versions prior to 535.274.02'), ('Linux(R580)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 580.95.05'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 570.195.03'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 535.274.02'), ('Linux(R580)', 'Tesla', 'All driver versions prior to 580.95.05'), ('Linux(R570)', 'Tesla', 'All driver versions prior to 570.195.03'), ('Linux(R535)', 'Tesla', 'All driver versions prior to 535.274.02'), ('Linux(R580 Gaming)', 'Guest driver', '580.82.07(All versions up to and including the August 2025 release)')],
            'fixed': [('Linux(R580)', 'GeForce', '580.95.05'), ('Linux(R570)', 'GeForce', '570.195.03'), ('Linux(R535)', 'GeForce', '535.274.02'), ('Linux(R580)', 'NVIDIA RTX, Quadro, NVS', '580.95.05'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', '570.195.03'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', '535.274.02'), ('Linux(R580)', 'Tesla', '580.95.05'), ('Linux(R570)', 'Tesla', '570.195.03'), ('Linux(R535)', 'Tesla', '535.274.02'), ('Linux(R580 Gaming)', 'Guest driver', '580.95.05(September 2025 Release)')]},
    }),
    '5630': ('Security Bulletin: NVIDIA GPU Display Driver - April 2025', '2025-04-24', {
        'CVE-2025-23244': {'where': 'NVIDIA GPU Display Driver for Linux contains a vulnerability', 'cwe': 'CWE-863', 'cvss': (7.8, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H'),
            'affected': [('Linux(R575)', 'GeForce', 'All driver versions prior to 575.51.02'), ('Linux(R570)', 'GeForce', 'All driver versions prior to 570.133.07'), ('Linux(R550)', 'GeForce', 'All driver versions prior to 550.163.01'), ('Linux(R535)', 'GeForce', 'All driver versions prior to 535.247.01'), ('Linux(R575)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 575.51.02'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 570.133.07'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 550.163.01'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', 'All driver versions prior to 535.247.01'), ('Linux(R575)', 'Tesla', 'All driver versions prior to 575.51.02'), ('Linux(R570)', 'Tesla', 'All driver versions prior to 570.133.07'), ('Linux(R550)', 'Tesla', 'All driver versions prior to 550.163.01'), ('Linux(R535)', 'Tesla', 'All driver versions prior to 535.247.01'), ('Linux(R570 Gaming)', 'Guest driver', '570.124.06(All versions up to and including the Feb 2025 release)')],
            'fixed': [('Linux(R575)', 'GeForce', '575.51.02'), ('Linux(R570)', 'GeForce', '570.133.07'), ('Linux(R550)', 'GeForce', '550.163.01'), ('Linux(R535)', 'GeForce', '535.247.01'), ('Linux(R575)', 'NVIDIA RTX, Quadro, NVS', '575.51.02'), ('Linux(R570)', 'NVIDIA RTX, Quadro, NVS', '570.133.07'), ('Linux(R550)', 'NVIDIA RTX, Quadro, NVS', '550.163.01'), ('Linux(R535)', 'NVIDIA RTX, Quadro, NVS', '535.247.01'), ('Linux(R575)', 'Tesla', '575.51.02'), ('Linux(R570)', 'Tesla', '570.133.07'), ('Linux(R550)', 'Tesla', '550.163.01'), ('Linux(R535)', 'Tesla', '535.247.01'), ('Linux(R570 Gaming)', 'Guest driver', '570.133.20(March 2025 Release)')]},
    }),
    '5594': ('Security Bulletin: NVIDIA CUDA Toolkit - January 2025', '2025-02-18', {
        'CVE-2024-53870': {'where': 'NVIDIA CUDA toolkit for all platforms contains a vulnerability in the cuobjdump binary', 'cwe': 'CWE-125', 'cvss': (3.3, 'CVSS:3.1/AV:L/AC:L/PR:N/UI:R/S:U/C:N/I:N/A:L'),
            'affected': [('Windows, Linux', 'NVIDIA CUDA Toolkit', 'All versions up to CUDA Toolkit 12.8')],
            'fixed': [('Windows, Linux', 'NVIDIA CUDA Toolkit', 'CUDA Toolkit 12.8')]},
    }),
    '5643': ('Security Bulletin: NVIDIA CUDA Toolkit - May 2025', '2025-05-27', {
        'CVE-2025-23247': {'where': 'NVIDIA CUDA toolkit for all platforms contains a vulnerability in the cuobjdump binary', 'cwe': 'CWE-130', 'cvss': (4.4, 'CVSS:3.1/AV:L/AC:L/PR:N/UI:R/S:U/C:L/I:L/A:N'),
            'affected': [('Windows, Linux', 'NVIDIA CUDA Toolkit', 'All versions up to CUDA Toolkit 12.9')],
            'fixed': [('Windows, Linux', 'NVIDIA CUDA Toolkit', 'CUDA Toolkit 12.9')]},
    }),
    '5582': ('Security Bulletin: NVIDIA Container Toolkit - September 2024', '2024-09-25', {
        'CVE-2024-0132': {'where': '', 'cwe': 'CWE-367', 'cvss': (9, 'CVSS:3.1/AV:N/AC:L/PR:L/UI:R/S:C/C:H/I:H/A:H'),
            'affected': [('Linux', 'NVIDIA Container Toolkit', 'All versions up to and including v1.16.1'), ('Linux', 'NVIDIA GPU Operator', 'All versions up to and including 24.6.1')],
            'fixed': [('Linux', 'NVIDIA Container Toolkit', 'v1.16.2'), ('Linux', 'NVIDIA GPU Operator', 'v24.6.2')]},
    }),
    '5599': ('Security Bulletin: NVIDIA Container Toolkit - January 2025', '2025-01-14', {
        'CVE-2024-0135': {'where': '', 'cwe': 'CWE-653', 'cvss': (7.6, 'CVSS:3.1/AV:N/AC:H/PR:H/UI:R/S:C/C:H/I:H/A:H'),
            'affected': [('Linux', 'NVIDIA Container Toolkit', 'All versions up to and including 1.17.0'), ('Linux', 'NVIDIA GPU Operator', 'All versions up to and including 24.9.0')],
            'fixed': [('Linux', 'NVIDIA Container Toolkit', '1.17.1'), ('Linux', 'NVIDIA GPU Operator', '24.9.1')]},
    }),
    '5616': ('Security Bulletin: NVIDIA Container Toolkit - February 2025', '2025-02-11', {
        'CVE-2025-23359': {'where': '', 'cwe': 'CWE-367', 'cvss': (8.3, 'CVSS:3.1/AV:N/AC:H/PR:N/UI:R/S:C/C:H/I:H/A:H'),
            'affected': [('Linux', 'NVIDIA Container Toolkit', 'All versions up to and including 1.17.3'), ('Linux', 'NVIDIA GPU Operator', 'All versions up to and including 24.9.1')],
            'fixed': [('Linux', 'NVIDIA Container Toolkit', '1.17.4'), ('Linux', 'NVIDIA GPU Operator', '24.9.2')]},
    }),
    '5659': ('Security Bulletin: NVIDIA Container Toolkit - July 2025', '2025-07-15', {
        'CVE-2025-23266': {'where': 'NVIDIA Container Toolkit for all platforms contains a vulnerability in some hooks used to initialize the container', 'cwe': 'CWE-426', 'cvss': (9, 'CVSS:3.1/AV:A/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H'),
            'affected': [('All', 'NVIDIA Container Toolkit', 'All versions up to and including 1.17.7 (CDI mode only for versions prior to 1.17.5)'), ('Linux', 'NVIDIA GPU Operator', 'All versions up to and including 25.3.1 (CDI mode only for versions prior to 25.3.1)'), ('Linux', 'NVIDIA Kubernetes Device Plugin', 'All versions up to and including 0.17.2 (only when device-list-strategy is cdi-annotations and/or cdi-cri)'), ('Linux', 'NVIDIA MIG Manager', 'All versions up to and including 0.12.1 (only when CDI is enabled)')],
            'fixed': [('All', 'NVIDIA Container Toolkit', '1.17.8'), ('Linux', 'NVIDIA GPU Operator', '25.3.2'), ('Linux', 'NVIDIA Kubernetes Device Plugin', '0.17.3'), ('Linux', 'NVIDIA MIG Manager', '0.12.2')]},
    }),
    '5687': ('Security Bulletin: NVIDIA Triton Inference Server - August 2025', '2025-08-04', {
        'CVE-2025-23310': {'where': 'NVIDIA Triton Inference Server for Windows and Linux contains a vulnerability', 'cwe': 'CWE-121', 'cvss': (9.8, 'CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H'),
            'affected': [('Windows, Linux', 'Triton Inference Server', 'All versions prior to 25.07')],
            'fixed': [('Windows, Linux', 'Triton Inference Server', '25.07')]},
    }),
    '5535': ('Security Bulletin: NVIDIA Triton Inference Server - April 2024', '2024-04-30', {
        'CVE-2024-0087': {'where': 'NVIDIA Triton Inference Server for Linux contains a vulnerability', 'cwe': 'CWE-73', 'cvss': (9, 'CVSS:3.1/AV:N/AC:L/PR:H/UI:N/S:C/C:H/I:L/A:H'),
            'affected': [('Linux(v22)', 'NVIDIA Triton Inference Server', '22.09 to 24.03')],
            'fixed': [('Linux(v22)', 'NVIDIA Triton Inference Server', '24.04')]},
    }),
    '5836': ('Security Bulletin: NVIDIA TensorRT - May 2026', '2026-05-19', {
        'CVE-2026-24188': {'where': 'NVIDIA TensorRT contains a vulnerability', 'cwe': 'CWE-787', 'cvss': (8.2, 'CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:H/A:L'),
            'affected': [('All', 'TensorRT', 'All versions prior to v10.16.1')],
            'fixed': [('All', 'TensorRT', 'v10.16.1')]},
    }),
    '5648': ('Security Bulletin: NVIDIA TensorRT LLM - April 2025', '2025-04-29', {
        'CVE-2025-23254': {'where': 'NVIDIA TensorRT-LLM for any platform contains a vulnerability in python executor where an attacker may cause a data validation issue by local access to the TRTLLM server. A successful exploit of this vulnerability may lead to code execution', 'cwe': 'CWE-502', 'cvss': (8.8, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H'),
            'affected': [('Windows, Linux, macOS', 'NVIDIA TensorRT-LLM', 'All versions prior to 0.18.2')],
            'fixed': [('Windows, Linux, macOS', 'NVIDIA TensorRT-LLM', '0.18.2')]},
    }),
    '5328': ('Security Bulletin: NVIDIA Data Center GPU Manager (DCGM) - March 2022', '2022-03-17', {
        'CVE-2022-21820': {'where': 'NVIDIA DCGM contains a vulnerability in nvhostengine', 'cwe': 'CWE-20', 'cvss': (6.3, 'CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:L/I:L/A:L'),
            'affected': [('Linux', 'DCGM', 'All versions prior to 2.3.4')],
            'fixed': [('Linux', 'DCGM', '2.3.4 and 2.3.5 (latest)')]},
    }),
    '5623': ('Security Bulletin: NVIDIA NeMo - March 2025', '2025-03-11', {
        'CVE-2025-23360': {'where': 'NVIDIA Nemo Framework contains a vulnerability', 'cwe': 'CWE-23', 'cvss': (7.1, 'CVSS:3.1/AV:L/AC:L/PR:N/UI:R/S:U/C:N/I:H/A:H'),
            'affected': [('Linux', 'NVIDIA NeMo Framework', 'All versions prior to 24.12')],
            'fixed': [('Linux', 'NVIDIA NeMo Framework', '24.12')]},
    }),
    '5811': ('Security Bulletin: NVIDIA DALI - April 2026', '2026-04-07', {
        'CVE-2026-24156': {'where': 'NVIDIA DALI contains a vulnerability', 'cwe': 'CWE-502', 'cvss': (7.3, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:R/S:U/C:H/I:H/A:H'),
            'affected': [('All', 'NVIDIA DALI', 'All versions prior to 2.0')],
            'fixed': [('All', 'NVIDIA DALI', '2.0')]},
    }),
    '5663': ('Security Bulletin: NVIDIA Megatron LM - June 2025', '2025-06-24', {
        'CVE-2025-23264': {'where': 'NVIDIA Megatron-LM for all platforms contains a vulnerability in a python component where an attacker may cause a code injection issue by providing a malicious file. A successful exploit of this vulnerability may lead to Code Execution', 'cwe': 'CWE-94', 'cvss': (7.8, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H'),
            'affected': [('All platforms', 'Megatron-LM', 'All versions prior to 0.12.1')],
            'fixed': [('All platforms', 'Megatron-LM', '0.12.1')]},
        'CVE-2025-23265': {'where': 'NVIDIA Megatron-LM for all platforms contains a vulnerability in a python component where an attacker may cause a code injection issue by providing a malicious file. A successful exploit of this vulnerability may lead to Code Execution', 'cwe': 'CWE-94', 'cvss': (7.8, 'CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H'),
            'affected': [('All platforms', 'Megatron-LM', 'All versions prior to 0.12.1')],
            'fixed': [('All platforms', 'Megatron-LM', '0.12.1')]},
    }),
}


def _csaf(bid: str) -> dict[str, Any]:
    """NVIDIA's CSAF 2.0 structure rebuilt from the facts above."""
    title, date, cves = NVIDIA[bid]
    archs: dict[str, list[dict[str, Any]]] = {}
    ids: dict[tuple[str, str, str], str] = {}
    for cve in cves.values():
        for arch, product, phrase in [*cve["affected"], *cve["fixed"]]:
            key = (arch, product, phrase)
            if key in ids:
                continue
            ids[key] = pid = f"p{len(ids)}"
            archs.setdefault(arch, []).append({
                "category": "product_version", "name": product,
                "product": {"name": phrase, "product_id": pid}})
    vulns = []
    for cve_id, cve in cves.items():
        v: dict[str, Any] = {
            "cve": cve_id,
            "product_status": {"known_affected": [ids[tuple(x)] for x in cve["affected"]],
                               "fixed": [ids[tuple(x)] for x in cve["fixed"]]},
            "notes": [{"category": "summary", "title": "Vulnerability description",
                       "text": cve["where"]}]}
        if cve["cwe"]:
            v["cwe"] = {"id": cve["cwe"], "name": ""}
        if cve["cvss"]:
            v["scores"] = [{"cvss_v3": {"version": "3.1", "baseScore": cve["cvss"][0],
                                        "vectorString": cve["cvss"][1]}, "products": []}]
        vulns.append(v)
    return {
        "document": {"category": "csaf_security_advisory", "csaf_version": "2.0",
                     "title": title, "publisher": {"name": "NVIDIA", "category": "vendor"},
                     "tracking": {"id": bid, "initial_release_date": date + "T00:00:00Z",
                                  "current_release_date": date + "T00:00:00Z"}},
        "product_tree": {"branches": [{"category": "vendor", "name": "NVIDIA", "branches": [
            {"category": "architecture", "name": a, "branches": b} for a, b in archs.items()]}]},
        "vulnerabilities": vulns,
    }


def _cve5(cve: str, sa: str, url: str, product: str, versions: list[dict[str, str]],
          score: tuple[float, str | None], cwe: str, date: str, *, vendor: str = "Intel",
          assigner: str = "intel", default: str = "unaffected", platforms: list[str] | None = None,
          tags: list[str] | None = None,
          more: Sequence[tuple[str, list[dict[str, str]]]] = ()) -> dict[str, Any]:
    """A CVE JSON 5 record in the shape Intel's and AMD's records have; ``more``: further
    ``affected`` entries (product, versions) of the same vendor and default status."""
    affected: dict[str, Any] = {"vendor": vendor, "product": product, "versions": versions,
                                "defaultStatus": default}
    if platforms:
        affected["platforms"] = platforms
    metric = {"baseScore": score[0]}
    if score[1]:
        metric["vectorString"] = score[1]
    cna: dict[str, Any] = {
        "affected": [affected, *({"vendor": vendor, "product": p, "versions": v,
                                  "defaultStatus": default} for p, v in more)],
        "descriptions": [{"lang": "en", "value": f"{product} advisory {sa}"}],
        "metrics": [{"cvssV3_1": metric}],
        "problemTypes": [{"descriptions": [{"cweId": cwe, "lang": "en", "type": "CWE"}]}],
        "references": [{"url": url}],
    }
    if tags:
        cna["tags"] = tags
    return {"dataType": "CVE_RECORD", "dataVersion": "5.1",
            "cveMetadata": {"cveId": cve, "assignerShortName": assigner, "state": "PUBLISHED",
                            "datePublished": date + "T00:00:00Z"},
            "containers": {"cna": cna}}


INTEL_SA = "https://www.intel.com/content/www/us/en/security-center/advisory/intel-sa-{n}.html"
AMD_SB = "https://www.amd.com/en/resources/product-security/bulletin/amd-sb-{n}.html"

CVE5 = [
    # INTEL-SA-01072 (2024-08-14): oneMKL before 2024.1
    # (the record as in cvelistV5 cves/2024/21xxx/CVE-2024-21766.json: vendor "n/a")
    _cve5("CVE-2024-21766", "INTEL-SA-01072", INTEL_SA.format(n="01072"),
          "Intel(R) oneAPI Math Kernel Library software",
          [{"version": "before version 2024.1", "status": "affected"}],
          (6.7, "CVSS:3.1/AV:L/AC:H/PR:L/UI:R/S:U/C:H/I:H/A:H"), "CWE-427", "2024-08-14",
          vendor="n/a"),
    # INTEL-SA-01243 (2025-05-13): DPC++/C++ compiler before 2025.0.0
    _cve5("CVE-2024-47795", "INTEL-SA-01243", INTEL_SA.format(n="01243"),
          "Intel(R) oneAPI DPC++/C++ Compiler",
          [{"version": "before version 2025.0.0", "status": "affected"}], (6.7, None),
          "CWE-427", "2025-05-13"),
    # INTEL-SA-01274 (2025-05-13): Level Zero, versions "See references"
    _cve5("CVE-2024-31073", "INTEL-SA-01274", INTEL_SA.format(n="01274"),
          "Intel(R) oneAPI Level Zero", [{"version": "See references", "status": "affected"}],
          (6.7, None), "CWE-1284", "2025-05-13"),
    # INTEL-SA-01253 (2025-05-13): Data Center GPU Flex Windows driver before 31.0.101.4314
    _cve5("CVE-2024-36292", "INTEL-SA-01253", INTEL_SA.format(n="01253"),
          "Intel(R) Data Center GPU Flex Series for Windows driver",
          [{"version": "before version 31.0.101.4314", "status": "affected"}], (7.3, None),
          "CWE-119", "2025-05-13"),
    # AMD-SB-6019 (2025-03-02): the record (cvelistV5 cves/2024/36xxx/CVE-2024-36353.json)
    # names the GPUs/APUs as products and the fix in the version string: "Radeon Software
    # For Linux 25.10.1" (and "Kernel 6.12.25 LTS" for embedded parts)
    _cve5("CVE-2024-36353", "AMD-SB-6019", AMD_SB.format(n="6019"),
          "AMD Radeon\u2122 RX 7000/PRO W7000 Series Graphics Products",
          [{"version": "Radeon Software For Linux 25.10.1", "status": "unaffected"}],
          (6.5, "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:C/C:H/I:N/A:N"), "CWE-459", "2025-03-02",
          vendor="AMD", assigner="AMD", default="affected",
          more=[("Ryzen\u2122 Embedded R1000", [{"version": "Kernel 6.12.25 LTS",
                                                  "status": "unaffected"}]),
                ("AMD Radeon\u2122 PRO V620", [{"version": "Contact your AMD Customer "
                                                 "Engineering representative",
                                                 "status": "unaffected"}])]),
    # INTEL-SA-01265 (2026-02-10): "before version 2025.0." with the sentence's full stop
    # (cves/2025/20xxx/CVE-2025-20106.json)
    _cve5("CVE-2025-20106", "INTEL-SA-01265", INTEL_SA.format(n="01265"),
          "VTune(TM) Profiler software and Intel(R) oneAPI Base Toolkits",
          [{"version": "before version 2025.0.", "status": "affected"}],
          (6.7, "CVSS:3.1/AV:L/AC:H/PR:L/UI:R/S:U/C:H/I:H/A:H"), "CWE-427", "2026-02-10",
          vendor="n/a"),
    # AMD-SB-6027 (2026-05-15): ASP firmware of Radeon and Instinct GPUs
    # (cves/2025/66xxx/CVE-2025-66664.json): the fix is a Windows AMD Software release for
    # Radeon cards, a ROCm release for Instinct (7.0, 6.3.1, 6.4.2, "BKC 26 (ROCm 7.0.1)"),
    # a quarter-named PRO Edition ("25.Q3.1 (25.10.32)") that names no numeric release
    _cve5("CVE-2025-66664", "AMD-SB-6027", AMD_SB.format(n="6027"),
          "AMD Radeon\u2122 RX 6000 Series Graphics Products",
          [{"version": "AMD Software: Adrenalin Edition 25.12.1 (25.10.37.01)",
            "status": "unaffected"}],
          (4.6, None), "CWE-125", "2026-05-15", vendor="AMD", assigner="AMD",
          default="affected",
          more=[("AMD Radeon\u2122 PRO W7000 Series Graphics Products",
                 [{"version": "AMD Software: PRO Edition 25.Q3.1 (25.10.32)",
                   "status": "unaffected"}]),
                ("AMD Instinct\u2122 MI250", [{"version": "ROCm 7.0", "status": "unaffected"}]),
                ("AMD Instinct\u2122 MI300X", [{"version": "ROCm 6.3.1",
                                                 "status": "unaffected"}]),
                ("AMD Instinct\u2122 MI308X", [{"version": "ROCm 6.4.2",
                                                 "status": "unaffected"}]),
                ("AMD Instinct\u2122 MI300A", [{"version": "BKC 26 (ROCm 7.0.1)",
                                                 "status": "unaffected"}])]),
    # AMD-SB-6005 (2024-08-13): Radeon RX 6000 cards, fixed in the Windows AMD Software
    # (cves/2023/20xxx/CVE-2023-20509.json)
    _cve5("CVE-2023-20509", "AMD-SB-6005", AMD_SB.format(n="6005"),
          "AMD Radeon\u2122 RX 6000 Series Graphics Cards",
          [{"version": "AMD Software:  Adrenalin Edition 23.12.1 (23.30.13.01)",
            "status": "unaffected"}],
          (5.2, "CVSS:3.1/AV:L/AC:H/PR:H/UI:N/S:U/C:L/I:H/A:L"), "CWE-20", "2024-08-13",
          vendor="AMD", assigner="AMD", default="affected"),
    # INTEL-SA-01219 (2024-11-13): Neural Compressor (PyPI neural-compressor) before v3.0
    # (cves/2024/28xxx/CVE-2024-28028.json)
    _cve5("CVE-2024-28028", "INTEL-SA-01219", INTEL_SA.format(n="01219"),
          "Intel(R) Neural Compressor software",
          [{"version": "before version v3.0", "status": "affected"}],
          (7.5, "CVSS:3.1/AV:A/AC:H/PR:N/UI:N/S:U/C:H/I:H/A:H"), "CWE-20", "2024-11-13",
          vendor="n/a"),
    # INTEL-SA-01187 (2024-11-13): VTune Profiler before 2024.2.0 (CVE-2024-37027)
    _cve5("CVE-2024-37027", "INTEL-SA-01187", INTEL_SA.format(n="01187"),
          "Intel(R) VTune(TM) Profiler software",
          [{"version": "before version 2024.2.0", "status": "affected"}],
          (6.1, "CVSS:3.1/AV:L/AC:L/PR:L/UI:R/S:U/C:L/I:L/A:H"), "CWE-20", "2024-11-13",
          vendor="n/a"),
    # INTEL-SA-01155 (2024-11-13): oneMKL "software for Windows" before 2024.2 (CVE-2024-28950)
    _cve5("CVE-2024-28950", "INTEL-SA-01155", INTEL_SA.format(n="01155"),
          "Intel(R) oneAPI Math Kernel Library software for Windows",
          [{"version": "before version 2024.2", "status": "affected"}],
          (6.7, "CVSS:3.1/AV:L/AC:H/PR:L/UI:R/S:U/C:H/I:H/A:H"), "CWE-427", "2024-11-13",
          vendor="n/a"),
    # INTEL-SA-01012 (2024-05-16): Libva before 2.20.0 (CVE-2023-39929)
    _cve5("CVE-2023-39929", "INTEL-SA-01012", INTEL_SA.format(n="01012"),
          "Libva software maintained by Intel(R)",
          [{"version": "before version 2.20.0", "status": "affected"}],
          (6.7, "CVSS:3.1/AV:L/AC:H/PR:L/UI:R/S:U/C:H/I:H/A:H"), "CWE-427", "2024-05-16",
          vendor="n/a"),
    # INTEL-SA-00818 (2023-08-11): oneVPL GPU runtime before 22.6.5 (CVE-2023-22338; the
    # record links the advisory over http://)
    _cve5("CVE-2023-22338", "INTEL-SA-00818",
          "http://www.intel.com/content/www/us/en/security-center/advisory/intel-sa-00818.html",
          "Intel(R) oneVPL GPU software",
          [{"version": "before version 22.6.5", "status": "affected"}],
          (4.4, "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:L/I:N/A:L"), "CWE-125", "2023-08-11",
          vendor="n/a"),
    # INTEL-SA-01158 (2024-11-13): OpenVINO Model Server before 2024.0 (CVE-2024-32048)
    _cve5("CVE-2024-32048", "INTEL-SA-01158", INTEL_SA.format(n="01158"),
          "Intel(R) Distribution of OpenVINO(TM) Model Server software",
          [{"version": "before version 2024.0", "status": "affected"}],
          (6.5, "CVSS:3.1/AV:A/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H"), "CWE-20", "2024-11-13",
          vendor="n/a"),
    # INTEL-SA-00937 (2024-05-16): two fixes, one per driver line (CVE-2023-43751)
    _cve5("CVE-2023-43751", "INTEL-SA-00937", INTEL_SA.format(n="00937"),
          "Intel(R) Graphics Windows DCH driver software",
          [{"version": "before versions 31.0.101.3790/31.0.101.2114", "status": "affected"}],
          (6.7, "CVSS:3.1/AV:L/AC:H/PR:L/UI:R/S:U/C:H/I:H/A:H"), "CWE-427", "2024-05-16",
          vendor="n/a"),
    # INTEL-SA-01165 (2024-11-13): Distribution for Python before 2024.2 (CVE-2024-29083)
    _cve5("CVE-2024-29083", "INTEL-SA-01165", INTEL_SA.format(n="01165"),
          "Intel(R) Distribution for Python software",
          [{"version": "before version 2024.2", "status": "affected"}],
          (6.7, "CVSS:3.1/AV:L/AC:H/PR:L/UI:R/S:U/C:H/I:H/A:H"), "CWE-276", "2024-11-13",
          vendor="n/a"),
    # AMD-SB-6015 (2024-11-12): HIP SDK (Windows), PRO before 24.10.16
    _cve5("CVE-2024-21937", "AMD-SB-6015", AMD_SB.format(n="6015"), "AMD HIP SDK",
          [{"version": "24.10.16", "status": "unaffected"}], (7.3, None), "CWE-427",
          "2024-11-12", vendor="AMD", assigner="AMD", default="affected",
          platforms=["Windows"]),
]

OSV = [
    # GHSA-53q9-r3pm-6pq6 (2025-04-18): torch < 2.6.0 (torch.load weights_only RCE)
    {"schema_version": "1.6.0", "id": "GHSA-53q9-r3pm-6pq6", "aliases": ["CVE-2025-32434"],
     "published": "2025-04-18T00:00:00Z", "modified": "2025-04-18T00:00:00Z",
     "summary": "PyTorch: torch.load with weights_only=True leads to remote code execution",
     "severity": [{"type": "CVSS_V4",
                   "score": "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"}],
     "affected": [{"package": {"ecosystem": "PyPI", "name": "torch"},
                   "ranges": [{"type": "ECOSYSTEM",
                               "events": [{"introduced": "0"}, {"fixed": "2.6.0"}]}]}],
     "references": [{"type": "WEB", "url": "https://github.com/advisories/GHSA-53q9-r3pm-6pq6"}]},
]
# CVE-2025-3730 (VulDB, 2025-04-16): torch 2.6.0 ctc_loss, disputed by the maintainers
CVE5.append(_cve5("CVE-2025-3730", "", "https://vuldb.com/?id.304959", "PyTorch",
                  [{"version": "2.6.0", "status": "affected"}], (3.3, None), "CWE-404",
                  "2025-04-16", vendor="n/a", assigner="VulDB", tags=["disputed"]))


@functools.lru_cache(maxsize=1)
def _db() -> AdvisoryDB:
    recs = []
    for bid in NVIDIA:
        year = NVIDIA[bid][1][:4]
        rec, why = gpu_record(import_csaf(_csaf(bid), source_url=NVIDIA_URL.format(year=year, bid=bid)))
        assert rec is not None, (bid, why)
        validate_record(rec)
        recs.append(rec)
    cve_recs = []
    for doc in CVE5:
        imp = import_cve5(doc)
        assert imp.record is not None, (doc["cveMetadata"]["cveId"], imp.skipped, imp.unmapped)
        cve_recs.append(imp.record)
    recs += by_advisory(cve_recs)
    for doc in OSV:
        imp = import_osv(doc)
        assert imp.record is not None
        recs.append(imp.record)
    return load_records(recs, source="vendor facts")


def test_every_bulletin_imports() -> None:
    ids = {a.id for a in _db()}
    assert len(ids) >= 25
    assert {"NVIDIA-5614", "NVIDIA-5747", "INTEL-SA-01072", "INTEL-SA-01243", "AMD-SB-6019",
            "GHSA-53q9-r3pm-6pq6"} <= ids
    for a in _db():
        assert a.sources and all(s.startswith("https://") for s in a.sources), a.id


def driver(version: str) -> Component:
    path = f"/usr/lib/x86_64-linux-gnu/libcuda.so.{version}"
    return Component(name="libcuda", version=version, ecosystem="generic",
                     purl=f"pkg:generic/nvidia/libcuda@{version}",
                     properties={"stack": "nvidia-driver", "product": "libcuda"},
                     evidence=[Evidence("nvidia-driver", "soname", path)], bom_ref=f"d{version}")


def gpu(name: str) -> Component:
    return Component(name=name, version=None, type=ComponentType.DEVICE,
                     properties={"vendor": "nvidia"}, bom_ref=f"gpu:{name}")


def pkg(eco: str, name: str, version: str, **props: str) -> Component:
    return Component(name=name, version=version, ecosystem=eco, properties=dict(props),
                     evidence=[Evidence(eco, "package-db", "/var/lib/dpkg/status"
                                        if eco == "deb" else None)],
                     bom_ref=f"{eco}:{name}@{version}")


def verdict(comps: list[Component], cve: str, **kw: Any) -> tuple[str, str | None, str] | None:
    for f in match(comps, _db(), **kw):
        if f.id == cve and f.components == (comps[0].bom_ref,):
            assert f.advisory is not None and f.advisory.rule
            return f.advisory.status, f.advisory.fixed_version, f.advisory.rule
    return None


CASES = [
    # 5614: CVE-2024-53869 lists R570 and R550 only; R535 is in the bulletin for its other
    # CVEs -> per-CVE product tree: not affected; CVE-2024-0150 does list R535
    ("5614 per-CVE branch", [driver("535.216.01")], "CVE-2024-53869", {}, None),
    ("5614 R535 listed", [driver("535.216.01")], "CVE-2024-0150", {},
     ("affected", "535.230.02", "driver-branch")),
    # 5614: R570 fixes differ: Tesla 570.86.15, GeForce/RTX 570.86.16
    ("5614 data-center host", [driver("570.86.15"), gpu("NVIDIA H200")], "CVE-2024-0150",
     {"target_kind": "host"}, None),
    ("5614 GeForce host", [driver("570.86.15"), gpu("NVIDIA GeForce RTX 4090")],
     "CVE-2024-0150", {"target_kind": "host"}, ("affected", "570.86.16", "driver-branch")),
    ("5614 line unknown", [driver("570.86.15")], "CVE-2024-0150", {},
     ("review", "570.86.16", "product-line")),
    # 5747: R590/R580/R570/R535 listed; R560 absent and older -> unsupported-branch
    ("5747 older branch", [driver("560.35.03")], "CVE-2025-33219", {},
     ("unsupported-branch", None, "unsupported-branch")),
    ("5747 newer branch", [driver("595.45.04")], "CVE-2025-33219", {}, None),
    ("5747 R580", [driver("580.95.05")], "CVE-2025-33219", {},
     ("affected", "580.126.09", "driver-branch")),
    # 5747: CVE-2025-33217 is Windows-only ("Display Driver for Windows")
    ("5747 Windows-only", [driver("580.95.05")], "CVE-2025-33217", {},
     ("not-affected", None, "windows-only")),
    # 5747: CVE-2025-33219 is in the kernel module: an image holds only user space
    ("5747 kernel-mode on an image", [driver("580.95.05")], "CVE-2025-33219",
     {"target_kind": "image"}, ("not-affected", "580.126.09", "kernel-mode-on-image")),
    ("5586 R565", [driver("565.57.01")], "CVE-2024-0126", {}, None),
    ("5586 R550 data center", [driver("550.120"), gpu("NVIDIA H100")], "CVE-2024-0126",
     {"target_kind": "host"}, ("affected", "550.127.05", "driver-branch")),
    ("5821 R580", [driver("580.126.09")], "CVE-2026-24187", {},
     ("affected", "580.159.03", "driver-branch")),
    ("5703 R570", [driver("570.172.08")], "CVE-2025-23280", {},
     ("affected", "570.195.03", "driver-branch")),
    ("5630 R550", [driver("550.163.01")], "CVE-2025-23244", {}, None),
    # 5594 / 5643: toolkit metapackage deb of NVIDIA's CUDA repository
    ("5594 toolkit deb", [pkg("deb", "cuda-toolkit-12-6", "12.6.3-1")], "CVE-2024-53870", {},
     ("affected", "12.8", "vendor-range")),
    ("5643 toolkit deb fixed", [pkg("deb", "cuda-toolkit-12-9", "12.9.0-1")], "CVE-2025-23247",
     {}, None),
    ("5643 toolkit deb", [pkg("deb", "cuda-toolkit-12-8", "12.8.1-1")], "CVE-2025-23247", {},
     ("affected", "12.9", "vendor-range")),
    # container toolkit: "All versions up to and including v1.16.1" etc.
    ("5582 ctk", [pkg("deb", "nvidia-container-toolkit", "1.16.1-1")], "CVE-2024-0132", {},
     ("affected", "1.16.2", "vendor-range")),
    ("5599 ctk fixed", [pkg("deb", "nvidia-container-toolkit", "1.17.1-1")], "CVE-2024-0135",
     {}, None),
    ("5616 ctk", [pkg("rpm", "nvidia-container-toolkit-base", "1.17.3-1")], "CVE-2025-23359",
     {}, ("affected", "1.17.4", "vendor-range")),
    # pre-releases order in their scheme: 1.17.7~rc.1 (deb) is 1.17.7-rc.1, inside "up to
    # and including 1.17.7"; 1.17.8~rc.1 is above 1.17.7, outside the vendor's range
    ("5659 ctk rc of affected", [pkg("deb", "nvidia-container-toolkit", "1.17.7~rc.1-1")],
     "CVE-2025-23266", {}, ("affected", "1.17.8", "vendor-range")),
    ("5659 ctk rc above range", [pkg("deb", "nvidia-container-toolkit", "1.17.8~rc.1-1")],
     "CVE-2025-23266", {}, None),
    ("5659 ctk fixed", [pkg("deb", "nvidia-container-toolkit", "1.17.8-1")], "CVE-2025-23266",
     {}, None),
    # Triton: a server version without a container label (PyPI tritonserver)
    ("5687 tritonserver wheel", [pkg("pypi", "tritonserver", "2.58.0")], "CVE-2025-23310", {},
     ("affected", "25.07", "triton-release-table")),
    ("5687 tritonserver fixed", [pkg("pypi", "tritonserver", "2.59.1")], "CVE-2025-23310", {},
     None),
    ("5535 triton 24.01", [pkg("pypi", "tritonserver", "2.42.0")], "CVE-2024-0087", {},
     ("affected", "24.04", "triton-release-table")),
    ("5836 tensorrt", [pkg("pypi", "tensorrt-cu12", "10.13.3.9")], "CVE-2026-24188", {},
     ("affected", "10.16.1", "vendor-range")),
    ("5648 tensorrt-llm", [pkg("pypi", "tensorrt-llm", "0.18.1")], "CVE-2025-23254", {},
     ("affected", "0.18.2", "vendor-range")),
    ("5328 dcgm", [pkg("deb", "datacenter-gpu-manager", "1:2.3.2-1")], "CVE-2022-21820", {},
     ("affected", "2.3.4", "vendor-range")),
    # NeMo names NeMo Framework container releases (24.12), not nemo-toolkit versions
    ("5623 nemo", [pkg("pypi", "nemo-toolkit", "2.1.0")], "CVE-2025-23360", {},
     ("review", None, "no-range")),
    ("5811 dali", [pkg("pypi", "nvidia-dali-cuda120", "1.52.0")], "CVE-2026-24156", {},
     ("affected", "2.0", "vendor-range")),
    ("5663 megatron", [pkg("pypi", "megatron-core", "0.12.0")], "CVE-2025-23264", {},
     ("affected", "0.12.1", "vendor-range")),
    # Intel: the distro package of a oneAPI component (Intel's APT repository)
    ("INTEL-SA-01072 deb", [pkg("deb", "intel-oneapi-mkl-2024.0", "2024.0.0-49656")],
     "CVE-2024-21766", {}, ("affected", "2024.1", "vendor-range")),
    ("INTEL-SA-01072 wheel", [pkg("pypi", "mkl", "2024.1.0")], "CVE-2024-21766", {}, None),
    ("INTEL-SA-01243 deb", [pkg("deb", "intel-oneapi-compiler-dpcpp-cpp-2024.2", "2024.2.1-1079")],
     "CVE-2024-47795", {}, ("affected", "2025.0.0", "vendor-range")),
    ("INTEL-SA-01274 see references", [pkg("deb", "libze1", "1.17.6-1")], "CVE-2024-31073", {},
     ("review", None, "no-range")),
    ("INTEL-SA-01253 Windows driver", [pkg("deb", "intel-opencl-icd", "24.22.29735.27-1")],
     "CVE-2024-36292", {}, None),
    # AMD states only the ROCm releases that fix the Instinct GPUs: an older ROCm is review
    ("AMD-SB-6027 ROCm before every fix", [pkg("deb", "rocm-core", "6.2.0.60200-66~22.04")],
     "CVE-2025-66664", {}, ("review", None, "no-range")),
    ("AMD-SB-6015 HIP SDK Windows", [pkg("deb", "rocm-core", "6.2.0.60200-66~22.04")],
     "CVE-2024-21937", {}, None),
    # oneAPI PyPI wheels of the same libraries as the intel-oneapi-* debs
    ("INTEL-SA-01072 wheel affected", [pkg("pypi", "mkl", "2024.0.0")], "CVE-2024-21766", {},
     ("affected", "2024.1", "vendor-range")),
    ("INTEL-SA-01243 wheel", [pkg("pypi", "dpcpp-cpp-rt", "2024.2.1")], "CVE-2024-47795", {},
     ("affected", "2025.0.0", "vendor-range")),
    ("INTEL-SA-01219 wheel", [pkg("pypi", "neural-compressor", "2.6")], "CVE-2024-28028", {},
     ("affected", "3.0", "vendor-range")),
    ("INTEL-SA-01219 wheel fixed", [pkg("pypi", "neural-compressor", "3.0")], "CVE-2024-28028",
     {}, None),
    ("INTEL-SA-01187 vtune deb", [pkg("deb", "intel-oneapi-vtune", "2024.1.0-573")],
     "CVE-2024-37027", {}, ("affected", "2024.2.0", "vendor-range")),
    ("INTEL-SA-01165 python deb", [pkg("deb", "intel-oneapi-python", "2024.1.0-1")],
     "CVE-2024-29083", {}, ("affected", "2024.2", "vendor-range")),
    # "... software for Windows": the Linux deb of the same library is not affected
    ("INTEL-SA-01155 Windows-only", [pkg("deb", "intel-oneapi-mkl-2024.1", "2024.1.0-691")],
     "CVE-2024-28950", {}, ("not-affected", None, "windows-only")),
    ("INTEL-SA-01012 libva", [pkg("deb", "libva2", "2.17.0-1")], "CVE-2023-39929", {},
     ("affected", "2.20.0", "vendor-range")),
    ("INTEL-SA-00818 oneVPL GPU", [pkg("deb", "libmfx-gen1.2", "22.6.4-1")], "CVE-2023-22338",
     {}, ("affected", "22.6.5", "vendor-range")),
    # the compute runtime's 24.x is not the oneVPL GPU runtime's 22.x
    ("INTEL-SA-00818 not the compute runtime", [pkg("deb", "intel-opencl-icd", "22.43.24595.41-1")],
     "CVE-2023-22338", {}, None),
    # the model server is not the openvino wheel
    ("INTEL-SA-01158 model server", [pkg("pypi", "openvino", "2023.3.0")], "CVE-2024-32048", {},
     None),
    ("AMD-SB-6005 Windows AMD Software", [pkg("deb", "amdgpu-dkms", "1:6.3.6.60100-1756574.22.04")],
     "CVE-2023-20509", {}, None),
    ("GHSA torch", [pkg("pypi", "torch", "2.5.1")], "CVE-2025-32434", {},
     ("affected", "2.6.0", "vendor-range")),
    ("GHSA torch NGC pre-release", [pkg("pypi", "torch", "2.6.0a0+ecf3bae40a.nv25.1")],
     "CVE-2025-32434", {}, ("review", "2.6.0", "prerelease-of-fix")),
    ("CVE-2025-3730 disputed", [pkg("pypi", "torch", "2.6.0")], "CVE-2025-3730", {},
     ("review", None, "disputed-cve")),
]


@pytest.mark.parametrize(("name", "comps", "cve", "kw", "want"), CASES, ids=[c[0] for c in CASES])
def test_vendor_verdict(name: str, comps: list[Component], cve: str, kw: dict[str, Any],
                        want: tuple[str, str | None, str] | None) -> None:
    assert verdict(comps, cve, **kw) == want


def test_line_undetermined_names_both_fixes() -> None:
    f = next(f for f in match([driver("570.86.15")], _db()) if f.id == "CVE-2024-0150")
    assert f.advisory is not None
    assert "570.86.15" in (f.advisory.reason or "") and "570.86.16" in (f.advisory.reason or "")


def test_amd_radeon_software_versions_are_not_compared_with_package_versions() -> None:
    # AMD names Radeon Software for Linux releases (25.10.1); amdgpu-dkms carries the kernel
    # driver's version (1:6.10.5.60400): judged by a person, never a false "affected"
    got = verdict([pkg("deb", "amdgpu-dkms", "1:6.10.5.60400-2084815.24.04")], "CVE-2024-36353")
    assert got is not None and got[0] == "review"


def test_enough_bulletins_across_vendors() -> None:
    vendors = {a.vendor for a in _db()}
    assert {"NVIDIA", "Intel", "AMD"} <= vendors
    bulletins = {a.id for a in _db()} | {a.vendor_id for a in _db() if getattr(a, "vendor_id", None)}
    assert len({a.id for a in _db()}) >= 25, bulletins


def _toolkit(tools: str) -> Component:
    root = "/usr/local/cuda-12.6"
    return Component(name="cuda-toolkit", version="12.6.3", ecosystem="generic",
                     properties={"stack": "cuda", "product": "cuda-toolkit", "location": root,
                                 "bin-tools-checked": "cuobjdump nvdisasm ptxas cu++filt "
                                                      "nvprune nvlink fatbinary",
                                 "bin-tools": tools},
                     evidence=[Evidence("cuda", "version-file", f"{root}/version.json")],
                     bom_ref="tk")


def test_cuda_toolkit_cve_in_an_absent_tool_is_not_affected() -> None:
    # 5594 CVE-2024-53870: "... contains a vulnerability in the cuobjdump binary"
    got = verdict([_toolkit("nvdisasm ptxas")], "CVE-2024-53870", target_kind="image")
    assert got == ("not-affected", "12.8", "cuda-part-absent")
    f = next(f for f in match([_toolkit("nvdisasm ptxas")], _db(), target_kind="image")
             if f.id == "CVE-2024-53870")
    assert f.advisory is not None and f.advisory.justification is not None
    assert "cuobjdump is not in /usr/local/cuda-12.6/bin" in f.advisory.justification
    # present: the version match stands; an SBOM (kind unknown) proves nothing
    assert verdict([_toolkit("cuobjdump nvdisasm")], "CVE-2024-53870", target_kind="image") == (
        "affected", "12.8", "vendor-range")
    assert verdict([_toolkit("")], "CVE-2024-53870") == ("affected", "12.8", "vendor-range")


def _aff(cve: str) -> list[dict[str, Any]]:
    doc = next(d for d in CVE5 if d["cveMetadata"]["cveId"] == cve)
    imp = import_cve5(doc)
    assert imp.record is not None
    return list(imp.record["vulnerabilities"][0]["affected"])


def test_amd_software_named_in_the_version_strings() -> None:
    # AMD-SB-6019: the product is the GPU; "Radeon Software For Linux 25.10.1" is the fix
    (a,) = _aff("CVE-2024-36353")
    assert (a["target"], a["vendor_product"], a["fixed"]) == (
        "amdgpu-linux-driver", "Radeon Software For Linux", ["25.10.1"])
    assert "no_range" in a and "ranges" not in a  # AMD does not say which versions are affected
    # AMD-SB-6005: the fix is a Windows AMD Software release
    (b,) = _aff("CVE-2023-20509")
    assert (b["target"], b["platform"], b["fixed"]) == ("amd-software-windows", "windows",
                                                         ["23.12.1"])


def test_amd_rocm_fix_and_no_invented_release() -> None:
    # AMD-SB-6027: "BKC 26 (ROCm 7.0.1)" is ROCm 7.0.1 (not a release "26"); "PRO Edition
    # 25.Q3.1 (25.10.32)" is quarter-named: its number is the driver version 25.10.32
    # (not "3.1")
    by = {(a["target"], a["vendor_product"]): a for a in _aff("CVE-2025-66664")}
    rocm = by[("rocm", "ROCm")]
    assert rocm["fixed"] == ["7.0", "6.3.1", "6.4.2", "7.0.1"] and "ranges" not in rocm
    assert "affected versions not stated" in rocm["no_range"]
    assert by[("amd-software-windows", "AMD Software: Adrenalin Edition")]["fixed"] == ["25.12.1"]
    pro = by[("amd-software-windows", "AMD Software: PRO Edition 25.Q3.1")]
    assert pro["fixed"] == ["25.10.32"] and pro["platform"] == "windows"
    assert not any("26" in a.get("fixed", []) or "3.1" in a.get("fixed", [])
                   for a in by.values())


def test_intel_full_stop_after_the_version() -> None:
    (a,) = _aff("CVE-2025-20106")
    assert a["ranges"] == [{"fixed": "2025.0"}]
    assert a["vendor_phrases"] == ["before version 2025.0."]


def test_intel_two_fixes_are_release_lines_not_a_range() -> None:
    # INTEL-SA-00937: "before versions 31.0.101.3790/31.0.101.2114" names one fix per line
    (a,) = _aff("CVE-2023-43751")
    assert a["platform"] == "windows" and "ranges" not in a
    assert a["fixed"] == ["31.0.101.3790", "31.0.101.2114"]
    assert "release line" in a["no_range"]


def test_intel_records_keep_the_advisory_id_and_facts() -> None:
    by_id = {a.id: a for a in _db()}
    adv = by_id["INTEL-SA-00818"]  # linked over http:// in the record
    assert "CVE-2023-22338" in adv.aliases
    v = next(v for v in adv.vulnerabilities if v.id == "CVE-2023-22338")
    assert v.cwe == ("CWE-125",) or list(v.cwe) == ["CWE-125"]
