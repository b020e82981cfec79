-- Issue 35: keys imported with their public key only (verify and encrypt-to keys). Their versions
-- keep public_key and no sealed_material; the flag says so on the key, so every answer and every
-- refusal (sign, decrypt, export, rotate by generation) can tell it from an erased key.
ALTER TABLE keys ADD COLUMN public_only boolean NOT NULL DEFAULT false;
