#!/usr/bin/env python3
"""A host written in Python, using CountdownStore's SQL contract on PostgreSQL through psycopg.

Each command prints one JSON object on stdout and exits 0, or prints what went wrong on stderr
and exits 1.

  place DSN SCHEMA ORDER_ID KEY DURATION [commit|rollback]
      Inserts an order into SCHEMA.shop_orders and starts its deadline with countdown_start,
      in one transaction, then commits or rolls back. Prints the countdown_start result.
  refuse DSN SCHEMA
      Calls the functions with bad input, each in a transaction of its own, and prints, for each,
      the SQLSTATE and the message, and whether the store's rows changed.
  consume DSN SCHEMA CONSUMER CLAIMANT EXPECTED LIMIT_SECONDS
      Claims expiries and, for each, inserts its effect into SCHEMA.shop_effects in the
      transaction that acknowledges it; rolls back when the acknowledgement says the claim was
      lost. Stops once SCHEMA.shop_effects holds EXPECTED rows, or after LIMIT_SECONDS.
"""

import json
import sys
import time

import psycopg


def connect(dsn, schema):
    connection = psycopg.connect(dsn, autocommit=False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('search_path', %s, false)", (schema,))
    connection.commit()
    return connection


def place(dsn, schema, order_id, key, duration, ending):
    with connect(dsn, schema) as connection:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO shop_orders (id, state) VALUES (%s, 'open')", (order_id,))
            cursor.execute("SELECT countdown_start(%s, %s::interval, 'payments', %s)", (key, duration, order_id))
            item = cursor.fetchone()[0]
        if ending == "rollback":
            connection.rollback()
        else:
            connection.commit()
    return {"item": item, "ended": ending}


BAD_CALLS = [
    ("empty key", "SELECT countdown_start('', '1 minute')"),
    ("control character", "SELECT countdown_start(E'bad\\tkey', '1 minute')"),
    ("key too long", "SELECT countdown_start(repeat('k', 257), '1 minute')"),
    ("negative duration", "SELECT countdown_start('neg', '-5 minutes')"),
    ("zero duration", "SELECT countdown_start('zero', '0 seconds')"),
    ("over 100 years", "SELECT countdown_start('long', '101 years')"),
    ("bad policy", "SELECT countdown_start('pol', '1 minute', NULL, NULL, 'sometimes')"),
    ("group too long", "SELECT countdown_start('grp', '1 minute', repeat('g', 129))"),
    ("payload too big", "SELECT countdown_start('big', '1 minute', NULL, repeat('p', 65537))"),
    ("bad extension", "SELECT countdown_extend('order-seed', '0 seconds')"),
    ("bad max_events", "SELECT * FROM countdown_claim('shop', 'r', 0)"),
    ("bad event id", "SELECT countdown_ack('shop', 'r', -1)"),
    ("empty claimant", "SELECT * FROM countdown_claim('shop', '')"),
]


def snapshot(cursor):
    cursor.execute(
        "SELECT (SELECT count(*) FROM countdowns), (SELECT count(*) FROM countdown_events), "
        "(SELECT count(*) FROM countdown_consumers), (SELECT count(*) FROM countdown_consumer_claims)")
    return list(cursor.fetchone())


def refuse(dsn, schema):
    results = []
    with connect(dsn, schema) as connection:
        for name, sql in BAD_CALLS:
            with connection.cursor() as cursor:
                before = snapshot(cursor)
            connection.commit()
            try:
                with connection.cursor() as cursor:
                    cursor.execute(sql)
                connection.commit()
                results.append({"name": name, "sqlstate": None, "message": "accepted"})
                continue
            except psycopg.Error as error:
                connection.rollback()
                sqlstate, message = error.sqlstate, error.diag.message_primary
            with connection.cursor() as cursor:
                after = snapshot(cursor)
            connection.commit()
            results.append({"name": name, "sqlstate": sqlstate, "message": message, "unchanged": before == after})
    return {"refusals": results}


def consume(dsn, schema, consumer, claimant, expected, limit):
    applied = 0
    lost = 0
    ended = time.monotonic() + limit
    with connect(dsn, schema) as connection:
        while time.monotonic() < ended:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM shop_effects")
                if cursor.fetchone()[0] >= expected:
                    break
            connection.commit()
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT event FROM countdown_claim(%s, %s, 20, interval '2 seconds') AS event", (consumer, claimant))
                events = [row[0] for row in cursor.fetchall()]
                if not events:
                    connection.commit()
                    time.sleep(0.05)
                    continue
                for event in events:
                    if event["event"] == "expired":
                        cursor.execute(
                            "INSERT INTO shop_effects (key, generation, claimant) VALUES (%s, %s, %s)",
                            (event["key"], event["generation"], claimant))
                cursor.execute("SELECT countdown_ack(%s, %s, %s, interval '2 seconds')",
                               (consumer, claimant, events[-1]["id"]))
                if cursor.fetchone()[0]:
                    connection.commit()
                    applied += sum(1 for event in events if event["event"] == "expired")
                else:
                    connection.rollback()
                    lost += 1
            print(json.dumps({"progress": applied}), file=sys.stderr, flush=True)
    return {"applied": applied, "lost_claims": lost}


def main(arguments):
    command = arguments[0]
    if command == "place":
        result = place(arguments[1], arguments[2], arguments[3], arguments[4], arguments[5],
                       arguments[6] if len(arguments) > 6 else "commit")
    elif command == "refuse":
        result = refuse(arguments[1], arguments[2])
    elif command == "consume":
        result = consume(arguments[1], arguments[2], arguments[3], arguments[4], int(arguments[5]),
                         float(arguments[6]))
    else:
        raise SystemExit("unknown command " + command)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
