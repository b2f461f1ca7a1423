// The OpenAPI document of the HTTP API, served at `api/openapi.json`. Generated from
// `openapi.json` at the root of the repository by `scripts/embed-openapi.py`: edit that file,
// run the script; a test checks that the two are one.

enum OpenAPIDocument {
    /// The document, OpenAPI 3.1, as JSON text.
    static let json = #"""
{
  "openapi": "3.1.0",
  "info": {
    "title": "CountdownStore HTTP API",
    "version": "1",
    "description": "The API of `countdown serve` and of a `CountdownDashboard` mounted in a Hummingbird host. Reads are open to whoever reaches the server; a write needs `Authorization: Bearer TOKEN` (unless the server runs with open writes behind an authenticating proxy) and `Content-Type: application/json`. Requests for a `Host` the server does not answer for get 421; writes from another site's page get 403."
  },
  "servers": [
    {
      "url": "http://127.0.0.1:8080"
    }
  ],
  "paths": {
    "/healthz": {
      "get": {
        "summary": "Whether the store can be read",
        "operationId": "health",
        "responses": {
          "200": {
            "description": "The store answers.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "type": "object",
                  "required": [
                    "status"
                  ],
                  "properties": {
                    "status": {
                      "const": "ok"
                    }
                  },
                  "additionalProperties": false
                }
              }
            }
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/status": {
      "get": {
        "summary": "Counts, clocks, lease and consumers",
        "operationId": "status",
        "responses": {
          "200": {
            "description": "The store's status.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Status"
                }
              }
            }
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/countdowns": {
      "get": {
        "summary": "A page of countdowns, in list order",
        "operationId": "list",
        "parameters": [
          {
            "name": "state",
            "in": "query",
            "required": false,
            "schema": {
              "type": "string",
              "enum": [
                "active",
                "running",
                "paused",
                "expired",
                "cancelled",
                "all"
              ],
              "default": "active"
            }
          },
          {
            "name": "group",
            "in": "query",
            "required": false,
            "description": "Only this group's items (empty: every group).",
            "schema": {
              "type": "string",
              "maxLength": 128,
              "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]*$"
            }
          },
          {
            "name": "limit",
            "in": "query",
            "required": false,
            "schema": {
              "type": "integer",
              "minimum": 1,
              "maximum": 1000,
              "default": 100
            }
          },
          {
            "name": "after",
            "in": "query",
            "required": false,
            "description": "The `next` of the previous page, unchanged.",
            "schema": {
              "type": "string"
            }
          }
        ],
        "responses": {
          "200": {
            "description": "A page of items, and the cursor of the next.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Page"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      },
      "post": {
        "summary": "Starts a countdown or a stopwatch",
        "operationId": "start",
        "security": [
          {
            "bearer": []
          }
        ],
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/StartBody"
              },
              "example": {
                "key": "order-1042",
                "duration": "15m",
                "group": "checkout",
                "payload": "{\"order\":1042}"
              }
            }
          }
        },
        "responses": {
          "200": {
            "description": "The item started (or, with `when_active: keep`, the active one kept).",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/countdowns/{key}": {
      "get": {
        "summary": "One item",
        "operationId": "show",
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item as `countdown show --json` prints it.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/countdowns/{key}/events": {
      "get": {
        "summary": "An item's events, newest first",
        "operationId": "itemEvents",
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          },
          {
            "name": "limit",
            "in": "query",
            "required": false,
            "schema": {
              "type": "integer",
              "minimum": 1,
              "maximum": 1000,
              "default": 50
            }
          }
        ],
        "responses": {
          "200": {
            "description": "The item's events among the store's latest 10,000.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Events"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/item": {
      "get": {
        "summary": "One item, the key in the query",
        "operationId": "showByQuery",
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/item/events": {
      "get": {
        "summary": "An item's events, the key in the query",
        "operationId": "itemEventsByQuery",
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          },
          {
            "name": "limit",
            "in": "query",
            "required": false,
            "schema": {
              "type": "integer",
              "minimum": 1,
              "maximum": 1000,
              "default": 50
            }
          }
        ],
        "responses": {
          "200": {
            "description": "The item's events.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Events"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/stream": {
      "get": {
        "summary": "Every event of the store as server-sent events",
        "operationId": "stream",
        "description": "Each event is one message: `id:` the event ID, `data:` the event as JSON (an `Event`). A comment every 15 s; the stream ends after 5 minutes (reconnect). At most `--max-streams` are open at once.",
        "responses": {
          "200": {
            "description": "The stream.",
            "content": {
              "text/event-stream": {
                "schema": {
                  "type": "string"
                }
              }
            }
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/metrics": {
      "get": {
        "summary": "Metrics in Prometheus text",
        "operationId": "metrics",
        "responses": {
          "200": {
            "description": "The metrics.",
            "content": {
              "text/plain": {
                "schema": {
                  "type": "string"
                }
              }
            }
          },
          "421": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/openapi.json": {
      "get": {
        "summary": "This document",
        "operationId": "openapi",
        "responses": {
          "200": {
            "description": "The OpenAPI document of this API.",
            "content": {
              "application/json": {
                "schema": {
                  "type": "object"
                }
              }
            }
          },
          "421": {
            "$ref": "#/components/responses/Error"
          }
        }
      }
    },
    "/api/countdowns/{key}/pause": {
      "post": {
        "summary": "Pauses an item",
        "operationId": "pause",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/item/pause": {
      "post": {
        "summary": "Pauses an item (the key in the query)",
        "operationId": "pauseByQuery",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/countdowns/{key}/resume": {
      "post": {
        "summary": "Resumes a paused item",
        "operationId": "resume",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/item/resume": {
      "post": {
        "summary": "Resumes a paused item (the key in the query)",
        "operationId": "resumeByQuery",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/countdowns/{key}/cancel": {
      "post": {
        "summary": "Cancels an item",
        "operationId": "cancel",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/item/cancel": {
      "post": {
        "summary": "Cancels an item (the key in the query)",
        "operationId": "cancelByQuery",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/countdowns/{key}/restart": {
      "post": {
        "summary": "Starts an item again from zero, in a new generation",
        "operationId": "restart",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/item/restart": {
      "post": {
        "summary": "Starts an item again from zero, in a new generation (the key in the query)",
        "operationId": "restartByQuery",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/countdowns/{key}/remove": {
      "post": {
        "summary": "Removes an item",
        "operationId": "remove",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/item/remove": {
      "post": {
        "summary": "Removes an item (the key in the query)",
        "operationId": "removeByQuery",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "description": "A write carries `Content-Type: application/json` even where it takes nothing (no form can send that type): send `{}`. The body is not read.",
          "content": {
            "application/json": {
              "schema": {
                "description": "Not read."
              },
              "example": {}
            }
          }
        }
      }
    },
    "/api/countdowns/{key}/extend": {
      "post": {
        "summary": "Adds time to a countdown",
        "operationId": "extend",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/AmountBody"
              },
              "example": {
                "duration": "5m"
              }
            }
          }
        }
      }
    },
    "/api/item/extend": {
      "post": {
        "summary": "Adds time to a countdown (the key in the query)",
        "operationId": "extendByQuery",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/AmountBody"
              },
              "example": {
                "duration": "5m"
              }
            }
          }
        }
      }
    },
    "/api/countdowns/{key}/shorten": {
      "post": {
        "summary": "Takes time off a countdown",
        "operationId": "shorten",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "path",
            "required": true,
            "description": "The key, percent-encoded (`encodeURIComponent`): any text of 1 to 256 UTF-8 bytes.",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/AmountBody"
              },
              "example": {
                "duration": "5m"
              }
            }
          }
        }
      }
    },
    "/api/item/shorten": {
      "post": {
        "summary": "Takes time off a countdown (the key in the query)",
        "operationId": "shortenByQuery",
        "security": [
          {
            "bearer": []
          }
        ],
        "parameters": [
          {
            "name": "key",
            "in": "query",
            "required": true,
            "description": "The key: any text of 1 to 256 UTF-8 bytes (`.` and `..` included, which a browser collapses in a path).",
            "schema": {
              "$ref": "#/components/schemas/Key"
            },
            "example": "order-1042"
          }
        ],
        "responses": {
          "200": {
            "description": "The item after the change.",
            "headers": {
              "X-Countdown-Now-Ms": {
                "$ref": "#/components/headers/NowMs"
              }
            },
            "content": {
              "application/json": {
                "schema": {
                  "$ref": "#/components/schemas/Countdown"
                }
              }
            }
          },
          "400": {
            "$ref": "#/components/responses/Error"
          },
          "401": {
            "$ref": "#/components/responses/Error"
          },
          "403": {
            "$ref": "#/components/responses/Error"
          },
          "404": {
            "$ref": "#/components/responses/Error"
          },
          "409": {
            "$ref": "#/components/responses/Error"
          },
          "413": {
            "$ref": "#/components/responses/Error"
          },
          "415": {
            "$ref": "#/components/responses/Error"
          },
          "421": {
            "$ref": "#/components/responses/Error"
          },
          "503": {
            "$ref": "#/components/responses/Error"
          }
        },
        "requestBody": {
          "required": true,
          "content": {
            "application/json": {
              "schema": {
                "$ref": "#/components/schemas/AmountBody"
              },
              "example": {
                "duration": "5m"
              }
            }
          }
        }
      }
    }
  },
  "components": {
    "schemas": {
      "Countdown": {
        "type": "object",
        "additionalProperties": false,
        "required": [
          "key",
          "group",
          "kind",
          "policy",
          "state",
          "duration_ms",
          "elapsed_ms",
          "remaining_ms",
          "started_at",
          "deadline_at",
          "expired_at",
          "generation",
          "payload"
        ],
        "properties": {
          "key": {
            "type": "string"
          },
          "group": {
            "type": [
              "string",
              "null"
            ]
          },
          "kind": {
            "type": "string",
            "enum": [
              "countdown",
              "stopwatch"
            ]
          },
          "policy": {
            "type": "string",
            "enum": [
              "wall",
              "active"
            ]
          },
          "state": {
            "type": "string",
            "enum": [
              "running",
              "paused",
              "expired",
              "cancelled"
            ]
          },
          "duration_ms": {
            "type": [
              "integer",
              "null"
            ]
          },
          "elapsed_ms": {
            "type": "integer",
            "minimum": 0
          },
          "remaining_ms": {
            "type": [
              "integer",
              "null"
            ]
          },
          "started_at": {
            "type": "string",
            "format": "date-time"
          },
          "deadline_at": {
            "type": [
              "string",
              "null"
            ],
            "format": "date-time"
          },
          "expired_at": {
            "type": [
              "string",
              "null"
            ],
            "format": "date-time"
          },
          "generation": {
            "type": "integer",
            "minimum": 1
          },
          "payload": {
            "type": [
              "string",
              "null"
            ]
          }
        },
        "example": {
          "key": "order-1042",
          "group": "checkout",
          "kind": "countdown",
          "policy": "wall",
          "state": "running",
          "duration_ms": 900000,
          "elapsed_ms": 1200,
          "remaining_ms": 898800,
          "started_at": "2026-11-27T10:00:00.000Z",
          "deadline_at": "2026-11-27T10:15:00.000Z",
          "expired_at": null,
          "generation": 1,
          "payload": "{\"order\":1042}"
        }
      },
      "Page": {
        "type": "object",
        "additionalProperties": false,
        "required": [
          "items",
          "next",
          "now",
          "now_ms"
        ],
        "properties": {
          "items": {
            "type": "array",
            "items": {
              "$ref": "#/components/schemas/Countdown"
            }
          },
          "next": {
            "type": [
              "string",
              "null"
            ]
          },
          "now": {
            "type": "string",
            "format": "date-time"
          },
          "now_ms": {
            "type": "integer"
          }
        }
      },
      "Event": {
        "type": "object",
        "additionalProperties": false,
        "required": [
          "id",
          "event",
          "key",
          "group",
          "generation",
          "recorded_at",
          "deadline_at",
          "fired_at",
          "late_ms",
          "payload",
          "detail"
        ],
        "properties": {
          "id": {
            "type": "integer"
          },
          "event": {
            "type": "string",
            "examples": [
              "started",
              "expired",
              "paused",
              "clock_edited"
            ]
          },
          "key": {
            "type": [
              "string",
              "null"
            ]
          },
          "group": {
            "type": [
              "string",
              "null"
            ]
          },
          "generation": {
            "type": [
              "integer",
              "null"
            ]
          },
          "recorded_at": {
            "type": "string",
            "format": "date-time"
          },
          "deadline_at": {
            "type": [
              "string",
              "null"
            ],
            "format": "date-time"
          },
          "fired_at": {
            "type": [
              "string",
              "null"
            ],
            "format": "date-time"
          },
          "late_ms": {
            "type": [
              "integer",
              "null"
            ]
          },
          "payload": {
            "type": [
              "string",
              "null"
            ]
          },
          "detail": {
            "type": [
              "string",
              "null"
            ],
            "description": "Figures of the kind, as JSON text"
          }
        }
      },
      "Events": {
        "type": "object",
        "additionalProperties": false,
        "required": [
          "items"
        ],
        "properties": {
          "items": {
            "type": "array",
            "items": {
              "$ref": "#/components/schemas/Event"
            }
          }
        }
      },
      "Counts": {
        "type": "object",
        "required": [
          "running",
          "paused",
          "expired",
          "cancelled"
        ],
        "properties": {
          "running": {
            "type": "integer",
            "minimum": 0
          },
          "paused": {
            "type": "integer",
            "minimum": 0
          },
          "expired": {
            "type": "integer",
            "minimum": 0
          },
          "cancelled": {
            "type": "integer",
            "minimum": 0
          }
        }
      },
      "Status": {
        "type": "object",
        "required": [
          "now",
          "now_ms",
          "read_only",
          "counts",
          "groups",
          "clock",
          "lease",
          "consumers"
        ],
        "properties": {
          "now": {
            "type": "string",
            "format": "date-time"
          },
          "now_ms": {
            "type": "integer"
          },
          "read_only": {
            "type": "boolean"
          },
          "counts": {
            "$ref": "#/components/schemas/Counts"
          },
          "groups": {
            "type": "array",
            "items": {
              "type": "object",
              "required": [
                "group",
                "running",
                "paused",
                "expired",
                "cancelled"
              ],
              "properties": {
                "group": {
                  "type": [
                    "string",
                    "null"
                  ]
                },
                "running": {
                  "type": "integer"
                },
                "paused": {
                  "type": "integer"
                },
                "expired": {
                  "type": "integer"
                },
                "cancelled": {
                  "type": "integer"
                }
              }
            }
          },
          "clock": {
            "type": "object",
            "required": [
              "wall_ms",
              "active_ms",
              "gap_ms",
              "calibration_offset_ms",
              "calibrated_at",
              "skew_ms",
              "suspended",
              "created_at",
              "last_heartbeat"
            ],
            "properties": {
              "wall_ms": {
                "type": "integer"
              },
              "active_ms": {
                "type": "integer"
              },
              "gap_ms": {
                "type": "integer"
              },
              "calibration_offset_ms": {
                "type": "integer"
              },
              "calibrated_at": {
                "type": [
                  "string",
                  "null"
                ],
                "format": "date-time"
              },
              "skew_ms": {
                "type": "integer"
              },
              "suspended": {
                "type": "boolean"
              },
              "created_at": {
                "type": "string",
                "format": "date-time"
              },
              "last_heartbeat": {
                "type": "string",
                "format": "date-time"
              }
            }
          },
          "lease": {
            "type": "object",
            "required": [
              "holder",
              "expires_at",
              "this_server"
            ],
            "properties": {
              "holder": {
                "type": [
                  "string",
                  "null"
                ]
              },
              "expires_at": {
                "type": [
                  "string",
                  "null"
                ],
                "format": "date-time"
              },
              "this_server": {
                "type": "boolean"
              }
            }
          },
          "consumers": {
            "type": "array",
            "items": {
              "type": "object",
              "required": [
                "name",
                "acknowledged_through",
                "lag"
              ],
              "properties": {
                "name": {
                  "type": "string"
                },
                "acknowledged_through": {
                  "type": "integer"
                },
                "lag": {
                  "type": "integer"
                }
              }
            }
          }
        }
      },
      "StartBody": {
        "type": "object",
        "required": [
          "key"
        ],
        "description": "A countdown needs `duration`; a stopwatch (`\"kind\": \"stopwatch\"`) has none. A field given as `null` is a field left out.",
        "oneOf": [
          {
            "required": [
              "duration"
            ],
            "properties": {
              "kind": {
                "enum": [
                  "countdown",
                  null
                ]
              }
            }
          },
          {
            "required": [
              "kind"
            ],
            "properties": {
              "kind": {
                "const": "stopwatch"
              },
              "duration": {
                "type": "null"
              }
            }
          }
        ],
        "properties": {
          "key": {
            "$ref": "#/components/schemas/Key"
          },
          "duration": {
            "anyOf": [
              {
                "$ref": "#/components/schemas/Duration"
              },
              {
                "type": "null"
              }
            ]
          },
          "group": {
            "type": [
              "string",
              "null"
            ],
            "description": "1 to 128 UTF-8 bytes, no control characters.",
            "minLength": 1,
            "maxLength": 128,
            "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
          },
          "policy": {
            "enum": [
              "wall",
              "active",
              null
            ],
            "default": "wall"
          },
          "payload": {
            "type": [
              "string",
              "null"
            ],
            "maxLength": 65536,
            "description": "At most 64 KiB of UTF-8."
          },
          "kind": {
            "enum": [
              "countdown",
              "stopwatch",
              null
            ],
            "default": "countdown"
          },
          "when_active": {
            "enum": [
              "refuse",
              "keep",
              "replace",
              null
            ],
            "default": "refuse"
          }
        }
      },
      "AmountBody": {
        "type": "object",
        "required": [
          "duration"
        ],
        "properties": {
          "duration": {
            "$ref": "#/components/schemas/Duration"
          }
        }
      },
      "Key": {
        "type": "string",
        "description": "1 to 256 UTF-8 bytes, no control characters; any other character is allowed.",
        "minLength": 1,
        "maxLength": 256,
        "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        "examples": [
          "order-1042"
        ]
      },
      "Duration": {
        "type": "string",
        "description": "A duration as the tool reads it, from 1 ms to 100 years: `250ms`, `90s`, `15m`, `1h30m`, `2d`, ISO 8601 (`PT15M`) or plain seconds. Any other text is refused with 400 `invalidDuration`.",
        "examples": [
          "90s",
          "15m",
          "1h30m"
        ]
      },
      "Error": {
        "type": "object",
        "additionalProperties": false,
        "required": [
          "error"
        ],
        "properties": {
          "error": {
            "type": "object",
            "additionalProperties": false,
            "required": [
              "code",
              "message"
            ],
            "properties": {
              "code": {
                "type": "string",
                "examples": [
                  "invalidKey",
                  "invalidDuration",
                  "notFound",
                  "alreadyActive",
                  "wrongState",
                  "unauthorized",
                  "readOnly",
                  "crossSite",
                  "notJSON",
                  "unknownHost",
                  "bodyTooLarge",
                  "tooManyStreams",
                  "storageFailure",
                  "internalError"
                ]
              },
              "message": {
                "type": "string",
                "description": "What went wrong, naming the bad value; never the server's insides (a storage failure gives a reference to the server's log)."
              }
            }
          }
        },
        "example": {
          "error": {
            "code": "invalidDuration",
            "message": "invalid duration \"15x\": give one like 90s, 15m or 1h30m"
          }
        }
      }
    },
    "responses": {
      "Error": {
        "description": "A refusal: the code and a message that names the bad value. 400 invalid input, 401 no or wrong token, 403 a write from another site, 404 unknown key or action, 409 the item's state refuses, 413 body over 256 KiB, 415 a write that is not JSON, 421 a Host the server does not answer for, 503 storage unavailable or too many streams (with Retry-After).",
        "content": {
          "application/json": {
            "schema": {
              "$ref": "#/components/schemas/Error"
            }
          }
        }
      }
    },
    "headers": {
      "NowMs": {
        "description": "The store wall clock, epoch milliseconds, when the answer was made.",
        "schema": {
          "type": "string",
          "pattern": "^-?[0-9]+$"
        }
      }
    },
    "securitySchemes": {
      "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "The server's token (`--token-file`, `--token` or `$COUNTDOWN_TOKEN`), at least 16 characters."
      }
    }
  }
}

"""#
}
