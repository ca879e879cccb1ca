"""The desktop pet against a live memd, a closed port and a server that never answers.

Run by tests/integration/examples.rs, which starts `memd serve` and passes
MEMD_URL, MEMD_PET_TOKEN (preset pet) and MEMD_SEED_TOKEN (preset dsh-desktop, scene main).
Standard library only: `python3 -m unittest -v test_pet`.
"""

import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid
from pathlib import Path

from memd_pet import FALLBACK, Pet, PetMemory

HERE = Path(__file__).parent


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run through `cargo nextest run --test integration examples::`")
    return value


class LiveMemd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url = env("MEMD_URL")
        cls.pet_token = env("MEMD_PET_TOKEN")
        cls.owner = PetMemory(cls.url, env("MEMD_SEED_TOKEN"), timeout=30)
        # The owner's main agent: a long-term fact, a sensitive one, and what is being said now.
        for body in (
            {"text": "主人对花生过敏，吃了会起疹子"},
            {"text": "主人的体检报告说血压偏高", "privacy": "sensitive"},
        ):
            a = cls.owner.call("/v1/write", body)
            assert a.ok, a
        a = cls.owner.call(
            "/v1/ingest",
            {"message_id": f"dsh-{uuid.uuid4()}", "text": "晚上想吃点花生", "sender": {"id": "owner", "name": "主人"}},
        )
        assert a.ok and a.body["action"] == "ADD", a

    def pet(self) -> PetMemory:
        # A debug build on a busy test machine: more time than the 1.5 s default.
        return PetMemory(self.url, self.pet_token, timeout=15)

    def test_each_turn_recalls_live_chat_and_long_term_memory(self):
        replies = []
        pet = Pet(self.pet(), reply=lambda prompt: replies.append(prompt) or "不能吃花生哦")
        said, memory = pet.turn("主人能吃花生吗")
        self.assertEqual(said, "不能吃花生哦")
        self.assertTrue(memory.ok)
        live, _, long_term = memory.text.partition("【长期记忆】")
        self.assertIn("【最近在聊的】", live)
        self.assertIn("主人：晚上想吃点花生", live)
        self.assertIn("主人对花生过敏", long_term)
        self.assertEqual([m["text"] for m in memory.live], ["晚上想吃点花生"])
        # The block went into the prompt, before the conversation.
        self.assertIn(memory.text.strip(), replies[0])
        self.assertLess(replies[0].index("【最近在聊的】"), replies[0].index("主人：主人能吃花生吗"))

    def test_sensitive_memories_never_reach_the_pet(self):
        memory = self.pet().recall(["主人：我的体检报告怎么说，血压高吗"])
        self.assertTrue(memory.ok)
        self.assertNotIn("血压偏高", memory.text)
        self.assertFalse(any("血压偏高" in h["text"] for h in memory.hits))

    def test_the_pet_writes_its_own_notes_and_only_in_pet(self):
        pet = self.pet()
        a = pet.note("主人喜欢我在早上打招呼")
        self.assertTrue(a.ok, a)
        self.assertTrue(a.body["id"].startswith("fact-pet-"), a.body)
        boot = pet.bootstrap()
        self.assertIn("主人喜欢我在早上打招呼", [n["text"] for n in boot["recent_self"]])
        self.assertTrue(all(n["subject"] == "self" for n in boot["recent_self"]))
        # The pet reads main but may not write there.
        denied = pet.call("/v1/write", {"scene": "main", "text": "主人喜欢猫"})
        self.assertEqual((denied.status, denied.code), (403, "FORBIDDEN"))

    def test_the_command_line_pet_prints_its_prompt_with_memory(self):
        out = subprocess.run(
            [sys.executable, str(HERE / "memd_pet.py"), "--url", self.url, "--timeout", "15"],
            input="主人能吃花生吗\n/note 主人说我很可爱\n",
            env={**os.environ, "MEMD_TOKEN": self.pet_token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("主人对花生过敏", out.stdout)
        self.assertIn("记下了。", out.stdout)


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class MemdAway(unittest.TestCase):
    def test_closed_port_gives_the_fallback_at_once(self):
        memory = PetMemory(f"http://127.0.0.1:{closed_port()}", "mh_unused", timeout=10.0)
        replies = []
        started = time.monotonic()
        said, m = Pet(memory, reply=lambda p: replies.append(p) or "我在呢").turn("你还记得我昨天说的吗")
        self.assertLess(time.monotonic() - started, 5.0)  # well within the timeout
        self.assertEqual(said, "我在呢")
        self.assertFalse(m.ok)
        self.assertEqual(m.text, FALLBACK)
        self.assertIn(FALLBACK, replies[0])
        self.assertIsNone(memory.bootstrap())
        self.assertEqual(memory.note("x").status, 0)

    def test_a_server_that_never_answers_gives_the_fallback_after_the_timeout(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        held = []
        stop = threading.Event()

        def accept():
            listener.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(listener.accept()[0])  # accept, then say nothing
                except OSError:
                    pass

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        try:
            memory = PetMemory(f"http://127.0.0.1:{listener.getsockname()[1]}", "mh_unused", timeout=0.5)
            started = time.monotonic()
            m = memory.recall(["主人：在吗"])
            took = time.monotonic() - started
            self.assertFalse(m.ok)
            self.assertEqual(m.text, FALLBACK)
            self.assertGreater(took, 0.4)
            self.assertLess(took, 5.0)
        finally:
            stop.set()
            t.join(5)
            for c in held:
                c.close()
            listener.close()


if __name__ == "__main__":
    unittest.main()
