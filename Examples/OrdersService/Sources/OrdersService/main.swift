import CountdownStore
import Foundation
import Logging
import OrdersApp

// `orders-service --db PATH [--port N] [--payment-window-ms N]`: the orders service on
// 127.0.0.1. It prints `listening on http://127.0.0.1:PORT` once it takes requests (`--port 0`
// picks a free port), and stops gracefully on SIGTERM or SIGINT. With $ORDERS_OPERATOR_PASSWORD
// set, the countdowns' dashboard at /countdowns/ asks for it and may change countdowns.

func usage(_ problem: String) -> Never {
    FileHandle.standardError.write(Data("orders-service: \(problem)\nusage: orders-service --db PATH [--port N] [--payment-window-ms N]\n".utf8))
    exit(64)
}

var arguments = CommandLine.arguments.dropFirst()
var databasePath: String?
var port = 8080
var paymentWindow: Duration = .seconds(15 * 60)
while let option = arguments.popFirst() {
    guard let value = arguments.popFirst() else { usage("\(option) needs a value") }
    switch option {
    case "--db": databasePath = value
    case "--port":
        guard let number = Int(value), (0...65535).contains(number) else { usage("invalid port \"\(value)\"") }
        port = number
    case "--payment-window-ms":
        guard let ms = Int64(value), ms > 0 else { usage("invalid payment window \"\(value)\": a positive number of milliseconds") }
        paymentWindow = .milliseconds(ms)
    default: usage("unknown option \"\(option)\"")
    }
}
guard let databasePath else { usage("--db is required") }

var logger = Logger(label: "orders-service")
logger.logLevel = .info
var configuration = OrdersService.Configuration(databasePath: databasePath)
configuration.port = port
configuration.paymentWindow = paymentWindow
configuration.logger = logger
configuration.countdowns.logger = logger
configuration.operatorPassword = ProcessInfo.processInfo.environment["ORDERS_OPERATOR_PASSWORD"].flatMap { $0.isEmpty ? nil : $0 }
let hostname = configuration.hostname

let service = try OrdersService(configuration: configuration)
try await service.run { port in
    FileHandle.standardOutput.write(Data("listening on http://\(hostname):\(port)\n".utf8))
}
