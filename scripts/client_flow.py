"""A till's day through the Python client generated from the served OpenAPI
document (scripts/client-check.sh generates it and runs this):

  log in as the demo admin, find a medicine in stock, make a sale (and replay
  it), read it back, register a till, push a batch holding one sale, read
  the sales report, then read every list and report that needs no
  parameter (as the admin: every answer must match the document),

each call through the generated typed function and models. Every answer must
have the expected status, parse into the expected model, and match the
document's schema for that status exactly: types, formats, nullability,
required fields, and no field the document does not name. Any difference
fails the run with the call and what differed.

    python client_flow.py BASE_URL DOCUMENT.json
"""

import copy
import datetime
import decimal
import importlib
import json
import re
import sys
import uuid

from openapi_schema_validator import OAS31Validator, oas31_format_checker

from pharmacy_client import AuthenticatedClient, Client
from pharmacy_client.api.auth import login
from pharmacy_client.api.devices import register_device
from pharmacy_client.api.medicines import list_medicines
from pharmacy_client.api.reports import get_sales_report
from pharmacy_client.api.sales import create_sale, get_sale
from pharmacy_client.api.sync import push_sync_changes
from pharmacy_client.models import (
    Device,
    DeviceCreate,
    LoginRequest,
    PagedMedicineView,
    PushAnswer,
    PushChange,
    PushChangePayload,
    Problem,
    PushRequest,
    Sale,
    SaleLineRequest,
    SaleRequest,
    SalesReport,
    TokenResponse,
)

EMAIL = "admin.hq@demo.pharmacy"
PASSWORD = "Demo-Pass-2026"


class FlowError(Exception):
    pass


OPEN = "#/components/x-open/"


def closed(schema):
    """The document's schemas with every object closed: a field the document
    does not name is an error. `unevaluatedProperties` sees through `allOf`;
    the members of an `allOf` refer to open copies of their schemas, so that
    the fields of one member are not unexpected in another."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "allOf" and isinstance(value, list):
                out[key] = [open_member(v) for v in value]
            else:
                out[key] = closed(value)
        if ("properties" in out or "allOf" in out) and "additionalProperties" not in out:
            out["unevaluatedProperties"] = False
        return out
    if isinstance(schema, list):
        return [closed(v) for v in schema]
    return schema


def open_member(schema):
    """An `allOf` member: its own object is left open (the `allOf` closes it)."""
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        return {**schema, "$ref": OPEN + ref.rsplit("/", 1)[1]}
    out = closed(schema)
    out.pop("unevaluatedProperties", None)
    return out


class Contract:
    def __init__(self, document):
        self.document = document
        components = copy.deepcopy(document.get("components", {}))
        self.components = closed(components)
        self.components["x-open"] = {
            name: open_member(schema) for name, schema in components.get("schemas", {}).items()
        }
        self.operations = {}
        for path, item in document["paths"].items():
            for method, operation in item.items():
                if isinstance(operation, dict) and "operationId" in operation:
                    self.operations[operation["operationId"]] = (method, path, operation)

    def check(self, operation_id, response, status, model):
        """The answer has `status`, parses into `model`, and matches the
        document's schema for that status."""
        if operation_id not in self.operations:
            raise FlowError(f"the document has no operation {operation_id}")
        method, path, operation = self.operations[operation_id]
        call = f"{operation_id} ({method.upper()} {path})"
        if int(response.status_code) != status:
            raise FlowError(
                f"{call}: status {int(response.status_code)}, expected {status}: "
                f"{response.content[:500]!r}"
            )
        if response.parsed is None or not isinstance(response.parsed, model):
            raise FlowError(
                f"{call}: parsed as {type(response.parsed).__name__}, expected {model.__name__}"
            )
        declared = operation["responses"].get(str(status))
        if declared is None:
            raise FlowError(f"{call}: status {status} is not documented")
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        media = declared.get("content", {}).get(content_type)
        if media is None:
            raise FlowError(f"{call}: content type {content_type!r} is not documented for {status}")
        schema = dict(closed(media["schema"]))
        schema["components"] = self.components
        body = json.loads(response.content)
        validator = OAS31Validator(schema, format_checker=oas31_format_checker)
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        if errors:
            lines = [
                f"  at /{'/'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in errors[:20]
            ]
            raise FlowError(f"{call}: the answer does not match the document:\n" + "\n".join(lines))
        print(f"client-check: {call} -> {status} {type(response.parsed).__name__} ok")
        return response.parsed


def money(text):
    return decimal.Decimal(text)


def snake(operation_id):
    return re.sub(r"(?<!^)([A-Z])", r"_\1", operation_id).lower()


def read_everything(contract, client):
    """Every GET without a path or required parameter, through its generated
    function: a JSON answer must be a documented success matching its
    schema (or a documented problem, such as 404 for no open cash session)."""
    count = 0
    for operation_id, (method, path, operation) in sorted(contract.operations.items()):
        if method != "get" or "{" in path:
            continue
        if any(p.get("required") for p in operation.get("parameters", [])):
            continue
        tag = operation["tags"][0].replace("-", "_")
        module = importlib.import_module(f"pharmacy_client.api.{tag}.{snake(operation_id)}")
        response = module.sync_detailed(client=client)
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        status = int(response.status_code)
        if content_type == "application/json":
            contract.check(operation_id, response, status, object)
            if status != 200:
                raise FlowError(f"{operation_id}: JSON answer with status {status}")
        elif content_type == "application/problem+json":
            contract.check(operation_id, response, status, Problem)
        elif str(status) not in operation["responses"]:
            raise FlowError(f"{operation_id}: undocumented status {status}")
        count += 1
    return count


def main(base_url, document_path):
    with open(document_path, encoding="utf-8") as f:
        contract = Contract(json.load(f))

    anonymous = Client(base_url=base_url, raise_on_unexpected_status=True)
    tokens = contract.check(
        "login",
        login.sync_detailed(client=anonymous, body=LoginRequest(email=EMAIL, password=PASSWORD)),
        200,
        TokenResponse,
    )
    if tokens.user.email != EMAIL or tokens.user.role != "admin":
        raise FlowError(f"signed in as {tokens.user.email} ({tokens.user.role})")
    client = AuthenticatedClient(
        base_url=base_url, token=tokens.access_token, raise_on_unexpected_status=True
    )

    page = contract.check(
        "listMedicines",
        list_medicines.sync_detailed(client=client, page_size=100),
        200,
        PagedMedicineView,
    )
    stocked = [m for m in page.items if m.stock_quantity >= 10 and not m.requires_prescription]
    if not stocked:
        raise FlowError("no medicine in stock without a prescription in the demo chain")
    medicine = stocked[0]
    price = money(medicine.selling_price)

    sale_request = SaleRequest(
        items=[SaleLineRequest(medicine_id=str(medicine.id), quantity=2)],
        payment_method="cash",
        client_mutation_id=f"client-check-{uuid.uuid4()}",
    )
    sale = contract.check(
        "createSale", create_sale.sync_detailed(client=client, body=sale_request), 201, Sale
    )
    if money(sale.total) != price * 2 or len(sale.items) != 1:
        raise FlowError(f"sale total {sale.total} for 2 x {price}")
    replay = contract.check(
        "createSale", create_sale.sync_detailed(client=client, body=sale_request), 200, Sale
    )
    if replay.id != sale.id:
        raise FlowError("a replay of the sale made another sale")
    again = contract.check("getSale", get_sale.sync_detailed(str(sale.id), client=client), 200, Sale)
    if again.invoice_hash != sale.invoice_hash:
        raise FlowError("the sale read back differs")

    device = contract.check(
        "registerDevice",
        register_device.sync_detailed(
            client=client, body=DeviceCreate(name=f"client-check till {uuid.uuid4().hex[:8]}")
        ),
        201,
        Device,
    )
    offline_sale = SaleRequest(
        items=[SaleLineRequest(medicine_id=str(medicine.id), quantity=1)],
        payment_method="cash",
    )
    mutation = f"client-check-push-{uuid.uuid4()}"
    batch = PushRequest(
        device_id=str(device.id),
        changes=[
            PushChange(
                client_mutation_id=mutation,
                entity="sale",
                op="create",
                payload=PushChangePayload.from_dict(offline_sale.to_dict()),
            )
        ],
    )
    answer = contract.check(
        "pushSyncChanges", push_sync_changes.sync_detailed(client=client, body=batch), 200, PushAnswer
    )
    if answer.rejected or [a.client_mutation_id for a in answer.accepted] != [mutation]:
        raise FlowError(f"push answer {answer.to_dict()}")

    today = datetime.date.today()
    report = contract.check(
        "getSalesReport",
        get_sales_report.sync_detailed(
            client=client, from_date=today - datetime.timedelta(days=1), to_date=today + datetime.timedelta(days=1)
        ),
        200,
        SalesReport,
    )
    if report.totals.count < 2:
        raise FlowError(f"the report counts {report.totals.count} sales, expected at least 2")
    recent = [r.invoice_number for r in report.recent_sales]
    if sale.invoice_number not in recent or answer.accepted[0].invoice_number not in recent:
        raise FlowError(f"the report's recent sales {recent} miss the sales just made")
    reads = read_everything(contract, client)
    print(
        f"client-check: passed (sale {sale.invoice_number}, pushed {answer.accepted[0].invoice_number}, "
        f"{report.totals.count} sales in the report, {reads} parameterless reads)"
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1], sys.argv[2])
    except FlowError as e:
        print(f"client-check: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
