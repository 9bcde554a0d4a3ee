"""Pays one x402-protected URL with the official Python client (PyPI x402 2.25,
extras evm + httpx) and prints what happened as one JSON object on stdout:
{status, headers, body, sent: [{method, url, headers}]}, `sent` being every
request the client put on the wire (so the caller sees the payment header).
Run by tests/e2e/x402-helpers.mjs inside its own venv:

    python x402_pay.py URL PRIVATE_KEY METHOD MAX_AMOUNT_PER_PAYMENT

MAX_AMOUNT_PER_PAYMENT (e.g. "$16") raises the client's spend control,
which refuses more than $1 per payment by default since 2.2x.

Client API as documented in x402 2.25: x402Client + register_exact_evm_client
with an EthAccountSigner, over httpx through x402_httpx_transport (the same
transport x402HttpxClient installs; used directly so an inner transport can
record what is sent).
"""

import asyncio
import json
import sys

import httpx
from eth_account import Account
from x402 import x402Client
from x402.http.clients import x402_httpx_transport
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.exact import register_exact_evm_client


class RecordingTransport(httpx.AsyncHTTPTransport):
    def __init__(self, sent):
        super().__init__()
        self.sent = sent

    async def handle_async_request(self, request):
        self.sent.append(
            {"method": request.method, "url": str(request.url), "headers": dict(request.headers)}
        )
        return await super().handle_async_request(request)


async def main(url, key, method, max_amount):
    client = x402Client()
    client.set_spend_controls({"max_amount_per_payment": max_amount})
    register_exact_evm_client(client, EthAccountSigner(Account.from_key(key)))
    sent = []
    transport = x402_httpx_transport(client, transport=RecordingTransport(sent))
    async with httpx.AsyncClient(transport=transport, timeout=60) as http:
        response = await http.request(method, url)
    print(
        json.dumps(
            {
                "status": response.status_code,
                "headers": dict(response.headers),
                "body": response.text,
                "sent": sent,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
