"""Offline stand-ins for the clouds' batch services, over real storage emulators.

Amazon Bedrock's batch inference jobs (:mod:`~aeval.cloud_standins.bedrock`, over moto's
S3 server) and Vertex AI's batch prediction jobs (:mod:`~aeval.cloud_standins.vertex`, over
gcp-storage-emulator): no emulator has either control plane, so aeval answers the SDKs'
calls itself and reads and writes the jobs' objects in the real emulators
(:mod:`~aeval.cloud_standins.emulators`, child processes stopped by their PIDs).
:mod:`~aeval.cloud_standins.offline` starts what the offline demo of ``bedrock/`` and
``vertex/`` models needs. A package of its own above :mod:`aeval.local`, whose responders
answer here too: the local server itself stays one generic batch server (its size is
held by tests/test_local_size.py), and these need boto3 and google-cloud-storage
(``aeval[emulators]``), which the local server does not.
"""
