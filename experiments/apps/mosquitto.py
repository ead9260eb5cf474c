"""mosquitto (MQTT 3.1.1 broker) relaying a periodic feed: a publisher sends 200 messages
of 512 B, one every 50 ms (QoS 0: with QoS 1 mosquitto_pub waits for each PUBACK before
the next period starts, so its rate would follow the round trip); a subscriber across
the same path receives them; both clients on the client's side, the broker on the server's: app-limited
streaming in both directions."""
from __future__ import annotations

import re
from pathlib import Path

from .recipe import Commands, Package, Recipe, RecipeError, private_dir, shell

BROKER = Package("mosquitto", "/usr/sbin/mosquitto")
PUB = Package("mosquitto-clients", "/usr/bin/mosquitto_pub")
SUB = Package("mosquitto-clients", "/usr/bin/mosquitto_sub")
PORT = 1883
MESSAGES, SIZE, PERIOD_S = 200, 512, 0.05
TOPIC = "magnet/feed"

CONFIG = """listener {port} 0.0.0.0
allow_anonymous true
persistence false
user root
log_dest stderr
"""

# The subscriber first; the publisher once the broker has acknowledged the subscription
# (its SUBACK in the subscriber's debug output, line-buffered by stdbuf), so that no
# message is published unheard.  The previous run's sub.out goes first: the shell truncates
# it in the forked subscriber, and the loop below could read its old SUBACK before that
# (twice in a fidelity study: the publisher connected first and one message went unheard).
CLIENT = """cd "{dir}"
rm -f sub.out
stdbuf -oL {sub} -h "$MAGNET_SERVER" -p {port} -t {topic} -q 0 -C {n} -W 120 -d > sub.out &
sub=$!
tries=0
until grep -q SUBACK sub.out; do
  tries=$((tries + 1)); [ $tries -lt 600 ] || {{ echo "no SUBACK" >&2; kill $sub; exit 1; }}; sleep 0.05
done
{pub} -h "$MAGNET_SERVER" -p {port} -t {topic} -q 0 -f payload.txt --repeat {n} --repeat-delay {period}
wait $sub || exit 1
echo "received=$(grep -c '^m' sub.out)"
"""


class Mosquitto(Recipe):
    name = "mosquitto"
    kind = "streaming"
    summary = (f"mosquitto_pub publishes {MESSAGES} messages of {SIZE} B every {PERIOD_S * 1000:.0f} ms "
               "(QoS 0) to the broker, which forwards them to mosquitto_sub across the same path")
    packages = (BROKER, PUB)
    port = PORT
    messages = MESSAGES
    work_params = ("messages",)
    slow_path_s = 12.0

    def prepare(self, work: Path) -> Commands:
        home = private_dir(work, "mosquitto")
        conf = home / "mosquitto.conf"
        conf.write_text(CONFIG.format(port=PORT))
        client_dir = private_dir(work, "mqtt-client")
        (client_dir / "payload.txt").write_bytes(b"m" * SIZE)
        client = shell(CLIENT.format(dir=client_dir, sub=SUB.program, pub=PUB.program, port=PORT,
                                     topic=TOPIC, n=self.messages, period=PERIOD_S))
        return Commands([BROKER.program, "-c", str(conf)], client, PORT, {"broker": home})

    def verify(self, stdout: str, commands: Commands) -> dict:
        m = re.search(r"received=(\d+)", stdout)
        if not m or int(m.group(1)) != self.messages:
            raise RecipeError(self.name, f"the subscriber received {m.group(1) if m else 'no'} of "
                                         f"{self.messages} messages")
        return {"messages": self.messages, "bytes": self.messages * SIZE}
