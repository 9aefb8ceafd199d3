"""An agent that reports nothing and calls its model until it is refused (a budget must stop it at the meter).

It prints the proxy it calls (``OPENAI_BASE_URL``) on stderr, so a test can tell which proxy metered it.
"""

import json
import os
import sys
import urllib.error
import urllib.request

print(os.environ["OPENAI_BASE_URL"], file=sys.stderr, flush=True)
while True:
    body = json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": "more"}]}).encode()
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=120).read()
    except urllib.error.HTTPError as error:
        raise SystemExit(f"refused: {error.code}") from None
